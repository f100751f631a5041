//go:build linux || darwin

package main

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// takeForeground moves the demo into a process group of its own and makes it
// the terminal's foreground group, so that Ctrl-C reaches the demo alone: it
// stops what it started and exits 0, and make (which would re-raise a
// SIGINT it got itself and exit 130) never sees the signal. It returns the
// function that gives the foreground back. Without a terminal, or when the
// demo is not in the foreground, it does nothing.
func takeForeground() (restore func()) {
	// The terminal is opened for ioctl only: nothing is written that closing it could lose.
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return func() {}
	}
	var orig int32
	if ioctl(tty.Fd(), syscall.TIOCGPGRP, &orig) != nil || int(orig) != syscall.Getpgrp() {
		_ = tty.Close()
		return func() {}
	}
	signal.Ignore(syscall.SIGTTOU) // a background group may then set the foreground
	if syscall.Setpgid(0, 0) != nil {
		_ = tty.Close()
		return func() {}
	}
	me := int32(syscall.Getpid())
	if ioctl(tty.Fd(), syscall.TIOCSPGRP, &me) != nil {
		_ = syscall.Setpgid(0, int(orig)) // back where it was
		_ = tty.Close()
		return func() {}
	}
	return func() {
		_ = ioctl(tty.Fd(), syscall.TIOCSPGRP, &orig)
		_ = tty.Close()
	}
}

func ioctl(fd uintptr, req uint, pgrp *int32) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, uintptr(req), uintptr(unsafe.Pointer(pgrp))); errno != 0 {
		return errno
	}
	return nil
}
