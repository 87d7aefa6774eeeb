package bench

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// fsType names the file system dir is on.
func fsType(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown file system"
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	}
	return fmt.Sprintf("file system 0x%x", st.Type)
}

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 a second on
// every Linux architecture Go builds for).
const clockTick = 10 * time.Millisecond

// cpuTicks is the CPU time process pid has used (user and system, in
// clock ticks), or false when /proc does not tell.
func cpuTicks(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command (which may hold spaces) start after ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return utime + stime, true
}

// writeBack writes out what is dirty on the file system that holds dir
// (syncfs(2)) and waits for it: the next timed run starts on a clean disk,
// so that a backend's own flush (gitmem's checkpoint) is not charged with
// the setup's copies or the other backend's unsynced writes. Best effort.
func writeBack(dir string) {
	if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		unix.Syncfs(fd)
		unix.Close(fd)
	}
}

// evict drops the files under each of dirs from the page cache
// (posix_fadvise DONTNEED on every regular file and folder, after a
// syncfs so that none is dirty): a store no call has used for hours, as
// far as one process can make it so without root. What it leaves cached
// is the kernel's: the inodes and the folders' entries (ext4 keeps a
// folder's blocks with the disk's, not the folder's own cache). `sync;
// echo 3 > /proc/sys/vm/drop_caches` as root drops those too, for the
// whole machine.
func evict(dirs []string) error {
	for i, dir := range dirs {
		if i == 0 {
			writeBack(dir)
		}
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() && !d.IsDir() {
				return err
			}
			fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
		})
		if err != nil {
			return fmt.Errorf("evict %s from the page cache: %w", dir, err)
		}
	}
	return nil
}
