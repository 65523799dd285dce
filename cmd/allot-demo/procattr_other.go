//go:build !linux

package main

import "syscall"

// childProcAttr: elsewhere the child shares the demo's process group, so a
// terminal's ^C reaches it directly and it stops on its own.
func childProcAttr() *syscall.SysProcAttr { return nil }
