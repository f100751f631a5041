//go:build !linux && !darwin

package main

// takeForeground does nothing where the demo cannot take the terminal's
// foreground: Ctrl-C then reaches make too.
func takeForeground() (restore func()) { return func() {} }
