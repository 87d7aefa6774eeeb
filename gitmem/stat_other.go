//go:build !linux

package gitmem

import "os"

func statOf(fi os.FileInfo) statInfo {
	return statInfo{mtimeSec: uint32(fi.ModTime().Unix()), mtimeNsec: uint32(fi.ModTime().Nanosecond()), size: uint32(fi.Size())}
}
