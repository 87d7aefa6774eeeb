package policy

import (
	"fmt"
	"strconv"
)

// Limits bounds what the model can store and how much one view returns.
// Zero fields mean "no limit".
type Limits struct {
	MaxFileBytes  int64 // largest single file
	MaxTotalBytes int64 // all files together
	MaxFiles      int   // number of files
	MaxViewBytes  int   // largest view result before it is paginated
}

// DefaultLimits are gitmem's defaults: 1 MiB per file, 100 MiB and 10,000
// files in all, 64 KiB per view.
var DefaultLimits = Limits{
	MaxFileBytes:  1 << 20,
	MaxTotalBytes: 100 << 20,
	MaxFiles:      10000,
	MaxViewBytes:  64 << 10,
}

// LimitError is a refusal because a limit would be exceeded. Its message
// names the limit and is shown to the model as is.
type LimitError struct{ Msg string }

func (e *LimitError) Error() string { return e.Msg }

// Usage is what the memory holds: the number of files and their total size.
type Usage struct {
	Files int
	Bytes int64
}

// Check returns a *LimitError if writing a file of newSize bytes at path
// (display form), replacing a file of oldSize bytes (oldSize < 0: a new
// file), would break a limit given the current usage.
func (l Limits) Check(path string, u Usage, oldSize, newSize int64) error {
	if l.MaxFileBytes > 0 && newSize > l.MaxFileBytes {
		return &LimitError{fmt.Sprintf("File %s would be %s, over the limit of %s per file",
			path, Count(newSize, "byte"), Count(l.MaxFileBytes, "byte"))}
	}
	files, total := u.Files, u.Bytes+newSize
	if oldSize < 0 {
		files++
	} else {
		total -= oldSize
	}
	if l.MaxFiles > 0 && oldSize < 0 && files > l.MaxFiles {
		return &LimitError{fmt.Sprintf("Cannot create %s: the memory already holds %s, the limit is %s",
			path, Count(int64(u.Files), "file"), Count(int64(l.MaxFiles), "file"))}
	}
	if l.MaxTotalBytes > 0 && total > l.MaxTotalBytes && total > u.Bytes {
		return &LimitError{fmt.Sprintf("Cannot write %s: the memory would hold %s, over the limit of %s in all",
			path, Count(total, "byte"), Count(l.MaxTotalBytes, "byte"))}
	}
	return nil
}

// Count formats n with commas and its unit, plural unless n is one:
// Count(1, "file") is "1 file", Count(10000, "file") "10,000 files".
func Count(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return Thousands(n) + " " + unit + "s"
}

// Thousands formats n with commas: 1048576 -> "1,048,576".
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
