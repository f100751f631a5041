package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/devserver"
)

// readFile returns a file of the repository.
func readFile(t *testing.T, name string) (string, string) {
	t.Helper()
	root, err := devserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b), root
}

// docSection returns the part of a Markdown file of the repository under a second-level
// heading ("## Dependencies"), up to the next one.
func docSection(t *testing.T, name, heading string) string {
	t.Helper()
	md, _ := readFile(t, name)
	_, section, ok := strings.Cut(md, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", name, heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

// tableCells returns the rows of the first Markdown table in text (after its header and
// separator lines, up to the first blank line), each row's cells trimmed; a row without
// cells cells fails the test.
func tableCells(t *testing.T, text string, cells int) [][]string {
	t.Helper()
	lines := strings.Split(text, "\n")
	sep := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "| ---") || strings.HasPrefix(l, "| :--") })
	if sep < 0 {
		t.Fatalf("no table in %.60q", text)
	}
	var rows [][]string
	for _, l := range lines[sep+1:] {
		if strings.TrimSpace(l) == "" {
			break
		}
		c := strings.Split(strings.Trim(l, "|"), "|")
		if len(c) != cells {
			t.Fatalf("row %q: %d cells, want %d", l, len(c), cells)
		}
		for i := range c {
			c[i] = strings.TrimSpace(c[i])
		}
		rows = append(rows, c)
	}
	if len(rows) == 0 {
		t.Fatalf("the table in %.60q has no rows", text)
	}
	return rows
}

// fence is a fenced code block of a Markdown file: its info string, its text and the
// line it starts on (from 1).
type fence struct {
	lang, text string
	line       int
}

// fences returns the fenced code blocks of md.
func fences(md string) []fence {
	var out []fence
	var cur *fence
	var body []string
	for i, l := range strings.Split(md, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &fence{lang: strings.TrimPrefix(l, "```"), line: i + 1}
			body = nil
		case cur != nil && l == "```":
			cur.text = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, l)
		}
	}
	return out
}

// readmeStart is how many lines of README.md a newcomer sees first: the install, the
// table and the example start there.
const readmeStart = 40

// TestReadmeFirstScreen: the README starts with the go get line, the table's creation and
// the example, in that order.
func TestReadmeFirstScreen(t *testing.T) {
	md, _ := readFile(t, "README.md")
	var steps []string
	for _, f := range fences(md) {
		if f.line > readmeStart {
			break
		}
		switch {
		case f.lang == "sh" && strings.HasPrefix(f.text, "go get "):
			steps = append(steps, "go get")
		case f.lang == "sh" && strings.HasPrefix(f.text, "idem create-table "):
			steps = append(steps, "create-table")
		case f.lang == "go":
			steps = append(steps, "example")
		}
	}
	if want := []string{"go get", "create-table", "example"}; !slices.Equal(steps, want) {
		t.Errorf("README's first %d lines hold %v, want %v", readmeStart, steps, want)
	}
	if !strings.Contains(md, "`go install ./cmd/idem`") {
		t.Error("README does not say how to install the idem command from a clone (go install ./cmd/idem)")
	}
}

// TestReadmeGoGet: every version the README's go get line pins is the one go.mod requires
// (what the tests run with).
func TestReadmeGoGet(t *testing.T) {
	md, _ := readFile(t, "README.md")
	mod, _ := readFile(t, "go.mod")
	var line string
	for _, f := range fences(md) {
		if f.lang == "sh" && strings.HasPrefix(f.text, "go get ") {
			line = strings.TrimSpace(f.text)
			break
		}
	}
	args := strings.Fields(line)
	if len(args) < 3 || !slices.Contains(args, "github.com/idemgo/idem") {
		t.Fatalf("README's go get line %q does not get github.com/idemgo/idem", line)
	}
	pinned := 0
	for _, a := range args[2:] {
		path, version, ok := strings.Cut(a, "@")
		if !ok {
			continue
		}
		pinned++
		if want := required(mod, path); version != want {
			t.Errorf("README pins %s@%s, go.mod requires %q", path, version, want)
		}
	}
	if pinned == 0 {
		t.Errorf("README's go get line %q pins no version", line)
	}
}

// required returns the version go.mod requires of path, or "".
func required(mod, path string) string {
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(path) + `\s+(v\S+)`).FindStringSubmatch(mod)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestReadmeDependencies: the README's dependency table names every module go.mod requires
// directly, and no other.
func TestReadmeDependencies(t *testing.T) {
	table := docSection(t, "README.md", "## Dependencies")
	mod, _ := readFile(t, "go.mod")
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`((?:[a-z0-9-]+\\.)+[a-z]+/[^`]+)`").FindAllStringSubmatch(table, -1) {
		named[m[1]] = true
	}
	var direct []string
	sc := bufio.NewScanner(strings.NewReader(mod))
	inRequire := false
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "require (":
			inRequire = true
		case l == ")":
			inRequire = false
		case inRequire && !strings.HasSuffix(l, "// indirect") && l != "":
			direct = append(direct, strings.Fields(l)[0])
		}
	}
	for _, path := range direct {
		if !named[path] && !namedAsPart(named, path) {
			t.Errorf("go.mod requires %s, which the README's dependency table does not name", path)
		}
	}
}

// namedAsPart reports whether path is one of the modules a table row names together, as
// "`github.com/aws/aws-sdk-go-v2` (+ `config`, `service/dynamodb`)" names
// github.com/aws/aws-sdk-go-v2/config.
func namedAsPart(named map[string]bool, path string) bool {
	for n := range named {
		if strings.HasPrefix(path, n+"/") {
			return true
		}
	}
	return path == "github.com/aws/smithy-go" && named["github.com/aws/aws-sdk-go-v2"]
}

// TestReadmeExample compiles the README's Go example as printed (inside this module, with
// its dependencies) and runs it under the Lambda runtime emulator against the test
// DynamoDB: one SQS batch with a duplicate, then the same batch again, runs the handler
// once per event_id, with no option or logger configured.
func TestReadmeExample(t *testing.T) {
	md, root := readFile(t, "README.md")
	var example string
	for _, f := range fences(md) {
		if f.lang == "go" {
			example = f.text
			break
		}
	}
	if example == "" {
		t.Fatal("README has no Go example")
	}
	bootstrap := buildExample(t, root, example, "the README's Go example")
	if os.Getenv("IDEM_SKIP_INTEGRATION") == "1" {
		t.Skip("IDEM_SKIP_INTEGRATION=1: the example compiles; not run")
	}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" {
		t.Fatal("no DynamoDB endpoint: run `make test` (internal/cmd/testenv sets AWS_ENDPOINT_URL_DYNAMODB), or set IDEM_SKIP_INTEGRATION=1")
	}
	table := regexp.MustCompile(`ddbstore\.New\([^,]+, "([^"]+)"\)`).FindStringSubmatch(example)
	if table == nil {
		t.Fatal("the example names no table in ddbstore.New")
	}
	cfg, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ddbstore.CreateTable(t.Context(), dynamodb.NewFromConfig(cfg), table[1]); err != nil {
		t.Fatal(err)
	}
	rieBin, err := devserver.LookupRIE(root)
	if err != nil {
		t.Fatal(err)
	}
	rie, err := devserver.StartRIE(t.Context(), rieBin, bootstrap, []string{"AWS_LAMBDA_FUNCTION_TIMEOUT=30", "AWS_LAMBDA_FUNCTION_NAME=readme-example"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rie.Stop() })

	run := fmt.Sprintf("%d", os.Getpid())
	msg := func(id, event string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, Body: fmt.Sprintf(`{"event_id":"evt-%s-%s"}`, run, event),
			EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:notify", AWSRegion: "us-east-1"}
	}
	batch, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{msg("m-1", "a"), msg("m-2", "a"), msg("m-3", "b")}})
	for delivery := 1; delivery <= 2; delivery++ {
		status, out, err := rie.Invoke(t.Context(), batch)
		var resp events.SQSEventResponse
		if err != nil || status != 200 || json.Unmarshal(out, &resp) != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("delivery %d: %d %s (%v); want no batch item failures\n%s", delivery, status, out, err, rie.Log())
		}
	}
	for _, event := range []string{"a", "b"} {
		body := fmt.Sprintf(`{"event_id":"evt-%s-%s"}`, run, event)
		if n := strings.Count(rie.Log(), "notifying for "+body); n != 1 {
			t.Errorf("the handler ran %d times for %s over two deliveries of a batch holding it %s, want once:\n%s",
				n, body, map[string]string{"a": "twice", "b": "once"}[event], rie.Log())
		}
	}
}

// buildExample compiles src (what names it in a failure) as the main package of a directory
// of this module that does not exist (an overlay), as a Lambda bootstrap, and returns the
// binary's path.
func buildExample(t *testing.T, root, src, what string) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, "internal", "readmeexample")
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(pkg, "main.go"): file}})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bootstrap")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-overlay", filepath.Join(dir, "overlay.json"), "-tags", "lambda.norpc", "-o", bin, "./internal/readmeexample")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s does not compile as printed: %v\n%s\n%s", what, err, out, src)
	}
	return bin
}

// TestDocsCiteRequiredVersions: where the README or a page of docs/ gives a full version of
// a module that go.mod requires ("aws-lambda-go v1.54.0", "github.com/aws/aws-lambda-go@v1.54.0"),
// it is the one go.mod requires.
func TestDocsCiteRequiredVersions(t *testing.T) {
	mod, root := readFile(t, "go.mod")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	cited := 0
	for _, m := range regexp.MustCompile(`(?m)^\s*(\S+) (v\d+\.\d+\.\d+)`).FindAllStringSubmatch(mod, -1) {
		path, want := m[1], m[2]
		name := path[strings.LastIndex(path, "/")+1:]
		if strings.HasPrefix(name, "v") && strings.Count(path, "/") > 2 { // a major version suffix: .../redis/go-redis/v9
			name = path[strings.LastIndex(path[:strings.LastIndex(path, "/")], "/")+1:]
		}
		re := regexp.MustCompile("(?:^|[\\s(`])(?:" + regexp.QuoteMeta(path) + "|" + regexp.QuoteMeta(name) + ")`?(?:@| v| at v| is pinned at )(v?\\d+\\.\\d+\\.\\d+)\\b")
		for _, page := range pages {
			b, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range re.FindAllStringSubmatch(string(b), -1) {
				cited++
				if got := "v" + strings.TrimPrefix(c[1], "v"); got != want {
					t.Errorf("%s cites %s %s; go.mod requires %s", filepath.Base(page), path, got, want)
				}
			}
		}
	}
	if cited == 0 {
		t.Error("no page cites a version of a required module: the pattern no longer matches the docs")
	}
}
