package gitdir

import (
	"os"
	"syscall"
)

func StatOf(fi os.FileInfo) Stat {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Stat{mtimeSec: uint32(fi.ModTime().Unix()), size: uint32(fi.Size())}
	}
	return Stat{
		ctimeSec: uint32(st.Ctim.Sec), ctimeNsec: uint32(st.Ctim.Nsec),
		mtimeSec: uint32(st.Mtim.Sec), mtimeNsec: uint32(st.Mtim.Nsec),
		dev: uint32(st.Dev), ino: uint32(st.Ino), uid: st.Uid, gid: st.Gid, size: uint32(st.Size),
	}
}
