package bench

import (
	"os"
	"path/filepath"
	"time"
)

// floor is what one durable append costs on this machine and file system:
// the physical floor under any durable write.
type floor struct {
	fsync, fdatasync, prealloc []time.Duration
}

// measureFloor appends 200 bytes and syncs, n times each way, in dir:
// fsync, fdatasync, and fdatasync of an overwrite of zeros written ahead
// (as gitmem's write-ahead log does: no metadata changes).
func measureFloor(dir string, n int) (floor, error) {
	var fl floor
	rec := make([]byte, 200)
	for i := range rec {
		rec[i] = 'a' + byte(i%26)
	}
	run := func(name string, prealloc bool, sync func(*os.File) error) ([]time.Duration, error) {
		p := filepath.Join(dir, name)
		defer os.Remove(p)
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if prealloc {
			if _, err := f.Write(make([]byte, 200*(n+1))); err != nil {
				return nil, err
			}
			if err := f.Sync(); err != nil {
				return nil, err
			}
		}
		var out []time.Duration
		for i := range n {
			t := time.Now()
			if _, err := f.WriteAt(rec, int64(200*i)); err != nil {
				return nil, err
			}
			if err := sync(f); err != nil {
				return nil, err
			}
			out = append(out, time.Since(t))
		}
		return out, nil
	}
	var err error
	if fl.fsync, err = run("floor-fsync", false, (*os.File).Sync); err != nil {
		return fl, err
	}
	if fl.fdatasync, err = run("floor-fdatasync", false, fdatasync); err != nil {
		return fl, err
	}
	fl.prealloc, err = run("floor-prealloc", true, fdatasync)
	return fl, err
}
