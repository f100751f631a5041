package main

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// exitCodes are every exit code of the command.
var exitCodes = []int{exitOK, exitError, exitUsage, exitNotFound, exitChanged, exitNotReleased, exitNoTable, exitSchema,
	exitDenied, exitConfig, exitUnavailable, exitLeftBehind, exitInterrupted}

// TestExitCodesDocumented: docs/operations.md's table of exit codes, the usage text and
// the package documentation name every exit code, and no other.
func TestExitCodesDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "## Exit codes and errors")
	if start < 0 {
		t.Fatal("docs/operations.md has no exit code table")
	}
	var rows []int
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \|`).FindAllStringSubmatch(text[start:], -1) {
		n, _ := strconv.Atoi(m[1])
		rows = append(rows, n)
	}
	if !slices.Equal(rows, exitCodes) {
		t.Errorf("docs/operations.md's exit codes %v, want %v", rows, exitCodes)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range exitCodes[1:] {
		if !regexp.MustCompile(`\b` + strconv.Itoa(code) + `\s+[a-zA-Z]`).MatchString(usage) {
			t.Errorf("the usage text does not name exit code %d", code)
		}
		if !regexp.MustCompile(`\b` + strconv.Itoa(code) + `\s+[a-zA-Z]`).Match(doc) {
			t.Errorf("doc.go does not name exit code %d", code)
		}
	}
}
