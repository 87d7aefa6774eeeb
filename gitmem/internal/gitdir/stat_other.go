//go:build !linux

package gitdir

import "os"

func StatOf(fi os.FileInfo) Stat {
	return Stat{mtimeSec: uint32(fi.ModTime().Unix()), mtimeNsec: uint32(fi.ModTime().Nanosecond()), size: uint32(fi.Size())}
}
