package webhook_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idemgo/idem/webhook"
)

// GitHub's published test vector, and the same payload tampered with.
func ExampleSender_Verify() {
	github := webhook.GitHub("It's a Secret to Everybody")
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	fmt.Println(github.Verify(h.Values, []byte("Hello, World!"), time.Now()))
	err := github.Verify(h.Values, []byte("Hello, World?"), time.Now())
	fmt.Println(errors.Is(err, webhook.ErrSignature))
	// Output:
	// <nil>
	// true
}

// A runner that keeps its records a day forgets a Stripe event before
// Stripe stops retrying it.
func ExampleSender_CheckRetention() {
	fmt.Println(webhook.Stripe("whsec_…").CheckRetention(24 * time.Hour))
	// Output:
	// webhook: Stripe may deliver one event again for 72h0m0s, but the runner keeps its records for 24h0m0s, after which a late delivery runs again: give the runner idem.WithRetention(72*time.Hour) or more, or accept the shorter window knowingly with the sender's WithWindow
}
