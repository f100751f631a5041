package idemlambda

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/idemgo/idem"
)

// TestMessageLifePicture: the picture of a message's life in docs/operations.md
// (docs/message-life.svg) names the code's verdicts, each once, every verdict a batch
// wrapper reaches among them, each in the group of what the code does with it by
// default: acknowledged (deleted from the queue), or reported; and among the
// reported, those no redelivery can make succeed (the verdicts WithAcknowledged
// accepts) apart from those a redelivery runs again.
func TestMessageLifePicture(t *testing.T) {
	f, err := os.Open("../docs/message-life.svg")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byName := map[string]idem.Verdict{}
	for _, v := range idem.Verdicts() {
		byName[v.String()] = v
	}
	groups := map[idem.Verdict]string{}
	dec := xml.NewDecoder(f)
	var group string
	var inVerdict bool
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("docs/message-life.svg is not XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			for _, a := range el.Attr {
				switch {
				case el.Name.Local == "g" && a.Name.Local == "data-group":
					group = a.Value
				case el.Name.Local == "text" && a.Name.Local == "class":
					inVerdict = slices.Contains(strings.Fields(a.Value), "verdict")
				}
			}
		case xml.EndElement:
			if el.Name.Local == "g" {
				group = ""
			}
			if el.Name.Local == "text" {
				inVerdict = false
			}
		case xml.CharData:
			if !inVerdict {
				continue
			}
			name := strings.TrimSpace(string(el))
			v, ok := byName[name]
			switch {
			case !ok:
				t.Errorf("the picture names %q, which is not a verdict", name)
			case groups[v] != "":
				t.Errorf("the picture names %s twice", name)
			default:
				groups[v] = group
			}
		}
	}
	for _, v := range idem.Verdicts() {
		got, shown := groups[v]
		want := "runs-again"
		switch {
		case slices.Contains(notBatch, v):
			if shown {
				t.Errorf("the picture shows %s, which no batch wrapper reaches", v)
			}
			continue
		case !shown:
			t.Errorf("the picture does not show %s", v)
			continue
		case !(acknowledged{}).reports(v):
			want = "acknowledged"
		case slices.Contains(acknowledgeable, v):
			if got != "release" && got != "fix" {
				t.Errorf("%s is in group %q; no redelivery makes it succeed: want release or fix", v, got)
			}
			continue
		}
		if got != want {
			t.Errorf("%s is in group %q, want %q", v, got, want)
		}
	}
}
