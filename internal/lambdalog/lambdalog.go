// Package lambdalog applies AWS Lambda's published rule for filtering a
// function's JSON application logs by level, so that tests can tell which
// lines of a function's standard output reach CloudWatch Logs at each
// ApplicationLogLevel.
//
// The rule, from "Log-level filtering" in the AWS Lambda Developer Guide
// (https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-log-level.html):
//
//   - With the JSON log format, Lambda reads the level of a line written as a
//     JSON object from its "level" key ("debug" in the page's example: the
//     names are not case-sensitive); if the "level" value is invalid or
//     missing, Lambda assigns the line the level INFO.
//   - For Lambda to use the timestamp field, it must be a valid RFC 3339
//     timestamp; if it is not, Lambda assigns the line the level INFO (and
//     adds a timestamp of its own). The page's example names the key
//     "timestamp", the name this package reads.
//   - The levels are, from the most detail to the least, TRACE, DEBUG, INFO,
//     WARN, ERROR and FATAL; Lambda sends the lines of the function's
//     ApplicationLogLevel and of less detail, and drops the others.
//
// A line that is not a JSON object is plain text, which Lambda wraps in a
// JSON record of level INFO.
package lambdalog

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Page is the AWS documentation page the rule comes from.
const Page = "https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-log-level.html"

// Levels are Lambda's application log levels, from the most detail to the
// least.
var Levels = []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}

// Level returns the level Lambda assigns to one line of a function's output
// under the JSON log format.
func Level(line []byte) string {
	var doc map[string]any
	if err := json.Unmarshal(line, &doc); err != nil {
		return "INFO" // plain text, wrapped as INFO
	}
	ts, _ := doc["timestamp"].(string)
	if !validRFC3339(ts) {
		return "INFO"
	}
	level, _ := doc["level"].(string)
	level = strings.ToUpper(level)
	if !slices.Contains(Levels, level) {
		return "INFO"
	}
	return level
}

// Kept reports whether Lambda sends line to CloudWatch Logs when the
// function's ApplicationLogLevel is applicationLogLevel (one of Levels).
func Kept(line []byte, applicationLogLevel string) bool {
	return slices.Index(Levels, Level(line)) >= slices.Index(Levels, strings.ToUpper(applicationLogLevel))
}

// validRFC3339 reports whether s is an RFC 3339 date-time ("T" or "t"
// between date and time, "Z", "z" or a numeric offset, optional fraction).
func validRFC3339(s string) bool {
	if s == "" {
		return false
	}
	_, err := time.Parse(time.RFC3339Nano, strings.ToUpper(s))
	return err == nil
}

// KeptLines returns how many of the non-empty lines of out Lambda sends to
// CloudWatch Logs at applicationLogLevel, and how many there are.
func KeptLines(out, applicationLogLevel string) (kept, lines int) {
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		lines++
		if Kept([]byte(line), applicationLogLevel) {
			kept++
		}
	}
	return kept, lines
}
