package lambdalog

import "testing"

func TestLevel(t *testing.T) {
	tests := []struct {
		name, line, want string
	}{
		{"the page's example", `{"level": "debug", "msg": "my debug log", "timestamp": "2024-11-02T16:51:31.587199Z"}`, "DEBUG"},
		{"upper case, offset, milliseconds", `{"level":"ERROR","timestamp":"2026-12-04T10:00:00.000+01:00"}`, "ERROR"},
		{"no fraction", `{"level":"WARN","timestamp":"2026-12-04T10:00:00Z"}`, "WARN"},
		{"no timestamp", `{"level":"ERROR","message":"x"}`, "INFO"},
		{"timestamp in epoch milliseconds", `{"level":"ERROR","timestamp":1764763200000}`, "INFO"},
		{"timestamp not RFC 3339", `{"level":"ERROR","timestamp":"2026-12-04 10:00:00"}`, "INFO"},
		{"another key for the time", `{"level":"ERROR","time":"2026-12-04T10:00:00Z"}`, "INFO"},
		{"no level", `{"timestamp":"2026-12-04T10:00:00Z"}`, "INFO"},
		{"an unknown level", `{"level":"CRITICAL","timestamp":"2026-12-04T10:00:00Z"}`, "INFO"},
		{"a level that is not a string", `{"level":40,"timestamp":"2026-12-04T10:00:00Z"}`, "INFO"},
		{"plain text", `ERROR something broke`, "INFO"},
		{"a JSON array", `[{"level":"ERROR","timestamp":"2026-12-04T10:00:00Z"}]`, "INFO"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Level([]byte(tc.line)); got != tc.want {
				t.Errorf("Level(%s) = %s, want %s", tc.line, got, tc.want)
			}
		})
	}
}

func TestKept(t *testing.T) {
	warn := []byte(`{"level":"WARN","timestamp":"2026-12-04T10:00:00Z"}`)
	for _, tc := range []struct {
		app  string
		want bool
	}{{"TRACE", true}, {"DEBUG", true}, {"INFO", true}, {"WARN", true}, {"warn", true}, {"ERROR", false}, {"FATAL", false}} {
		if got := Kept(warn, tc.app); got != tc.want {
			t.Errorf("Kept(WARN line, %s) = %v, want %v", tc.app, got, tc.want)
		}
	}
	if Kept([]byte(`{"level":"ERROR"}`), "WARN") {
		t.Error("an ERROR line without a timestamp is kept at WARN; Lambda makes it INFO and drops it")
	}
}

func TestKeptLines(t *testing.T) {
	out := `{"level":"ERROR","timestamp":"2026-12-04T10:00:00Z"}` + "\n\n" + `{"level":"ERROR"}` + "\nplain\n"
	if kept, lines := KeptLines(out, "WARN"); kept != 1 || lines != 3 {
		t.Errorf("KeptLines = %d of %d, want 1 of 3", kept, lines)
	}
}
