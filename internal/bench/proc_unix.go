//go:build unix

package bench

import (
	"os/exec"
	"syscall"
)

// newProcessGroup makes cmd's process lead a group of its own, which
// killGroup ends with every child it forked.
func newProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

func killGroup(cmd *exec.Cmd) { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

// syncDisk writes every file system's dirty pages out.
func syncDisk() { syscall.Sync() }
