package storetest

import (
	"os"
	"strings"
	"testing"
)

// checklistPage is the page whose checklist is what Run and RunFaults check.
const checklistPage = "../docs/writing-a-store.md"

// checklist renders the checklist of Run's and RunFaults's cases: one line
// per case, its name, its faults (one subtest each) and its doc.
func checklist() (run, faults string) {
	var b strings.Builder
	for _, c := range append(append(append(append(append(append(cases[:len(cases):len(cases)], releaseCases...), renewCases...), stepCases...), acquireCases...), combinedCases...), releaseStepCases...) {
		b.WriteString("- [ ] `" + c.name + "`: " + c.doc + ".\n")
	}
	run = b.String()
	b.Reset()
	for _, c := range append(faultCases[:len(faultCases):len(faultCases)], acquireFaultCases...) {
		b.WriteString("- [ ] `" + c.name + "`")
		if len(c.faults) > 0 {
			names := make([]string, len(c.faults))
			for i, f := range c.faults {
				names[i] = f.String()
			}
			b.WriteString(" (" + strings.Join(names, ", ") + ")")
		}
		b.WriteString(": " + c.doc + ".\n")
	}
	return run, b.String()
}

// TestChecklist checks that docs/writing-a-store.md lists exactly the cases
// of Run and RunFaults, in their words.
func TestChecklist(t *testing.T) {
	page, err := os.ReadFile(checklistPage)
	if err != nil {
		t.Fatal(err)
	}
	run, faults := checklist()
	for what, want := range map[string]string{"Run": run, "RunFaults": faults} {
		if !strings.Contains(string(page), want) {
			t.Errorf("%s does not have the checklist of %s; want these lines together:\n%s", checklistPage, what, want)
		}
	}
	n := 0
	for line := range strings.Lines(string(page)) {
		if strings.HasPrefix(line, "- [ ] ") {
			n++
		}
	}
	if want := len(cases) + len(releaseCases) + len(renewCases) + len(stepCases) + len(acquireCases) + len(combinedCases) + len(releaseStepCases) + len(faultCases) + len(acquireFaultCases); n != want {
		t.Errorf("%s has %d checklist lines, want %d (one per case)", checklistPage, n, want)
	}
}
