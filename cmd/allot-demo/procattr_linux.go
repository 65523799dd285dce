package main

import "syscall"

// childProcAttr puts a child in its own process group and kills it should the
// demo die without stopping it (SIGKILL, a crash).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
