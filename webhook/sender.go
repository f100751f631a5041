package webhook

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgo/idem/core"
)

// The senders' headers, as each documents them (looked up
// case-insensitively).
const (
	// HeaderGitHubSignature carries GitHub's signature: "sha256=" and the
	// hex HMAC-SHA256 of the body.
	HeaderGitHubSignature = "X-Hub-Signature-256"
	// HeaderGitHubDelivery carries GitHub's delivery GUID, the same when a
	// delivery is redelivered.
	HeaderGitHubDelivery = "X-GitHub-Delivery"
	// HeaderStripeSignature carries Stripe's timestamp and signatures:
	// "t=<unix seconds>,v1=<hex>[,v1=<hex>...][,v0=...]".
	HeaderStripeSignature = "Stripe-Signature"
	// HeaderShopifyHMAC carries Shopify's signature: the base64 HMAC-SHA256
	// of the body.
	HeaderShopifyHMAC = "X-Shopify-Hmac-Sha256"
	// HeaderShopifyEventID carries the id of the Shopify event a webhook
	// reports: the same value on two webhooks marks a duplicate.
	HeaderShopifyEventID = "X-Shopify-Event-Id"
)

// The senders' windows and Stripe's tolerance, as each documents them.
const (
	// GitHubWindow is how long GitHub lets a delivery be redelivered
	// (github.com: the past 3 days; GitHub Enterprise Server: 7 days,
	// WithWindow(7*24*time.Hour)). GitHub does not redeliver on its own.
	GitHubWindow = 3 * 24 * time.Hour
	// StripeWindow is how long Stripe retries an event in live mode: up to
	// three days.
	StripeWindow = 3 * 24 * time.Hour
	// ShopifyWindow is how long Shopify retries a webhook: 8 times over 4
	// hours.
	ShopifyWindow = 4 * time.Hour
	// StripeTolerance is the default tolerance of a Stripe-Signature's
	// timestamp, Stripe's own libraries' default: 5 minutes.
	StripeTolerance = 300 * time.Second
)

// ErrSignature is the error of Sender.Verify for a delivery it refuses: a
// signature missing, malformed, matching none of the secrets, or (Stripe)
// with a timestamp outside the tolerance. Checked with errors.Is.
var ErrSignature = errors.New("webhook: signature missing or invalid")

// Encoding is how a signature's bytes are written in its header.
type Encoding int

const (
	// Hex is lower- or upper-case hexadecimal (GitHub, Stripe).
	Hex Encoding = iota
	// Base64 is standard base64 with padding (Shopify).
	Base64
)

// scheme is how a sender signs.
type scheme int

const (
	bodyHMAC   scheme = iota // an HMAC-SHA256 of the raw body in one header
	stripeHMAC               // Stripe's t=...,v1=... over "<t>.<body>"
)

// Sender is one webhook sender's contract (see the package documentation).
// Build it with GitHub, Stripe, Shopify or HMAC; the zero Sender is not
// usable (Err says so).
type Sender struct {
	name      string
	scheme    scheme
	header    string // the signature's header
	prefix    string // before the encoded signature ("sha256=")
	encoding  Encoding
	secrets   [][]byte
	keyHeader string // the duplicate-detection id: a header, or
	keyField  string // a body field
	ignore    []string
	window    time.Duration
	tolerance time.Duration // stripeHMAC only
	err       error
}

// GitHub is the sender of GitHub webhooks: X-Hub-Signature-256 holds
// "sha256=" and the hex HMAC-SHA256 of the raw body with the webhook's
// secret; the key is X-GitHub-Delivery (the same on a redelivery, which
// resends the body unchanged: the whole body is fingerprinted); window
// GitHubWindow. secrets are the webhook's secrets, several during a
// rotation.
func GitHub(secrets ...string) Sender {
	return newSender(Sender{name: "GitHub", scheme: bodyHMAC, header: HeaderGitHubSignature, prefix: "sha256=", encoding: Hex,
		keyHeader: HeaderGitHubDelivery, window: GitHubWindow}, secrets)
}

// Stripe is the sender of Stripe webhooks: Stripe-Signature holds a
// timestamp t and one or more v1 signatures, each the hex HMAC-SHA256 of
// "<t>.<raw body>" with the endpoint's signing secret (any v1 may match;
// other schemes, such as v0, are ignored), and t must be within
// StripeTolerance of the wrapper's clock (WithTolerance); the key is the
// event's id in the JSON body, the same on every retry and for every
// endpoint the event is sent to; the fingerprint leaves out
// pending_webhooks, a count that changes between two deliveries of one
// event (the signature's header is not fingerprinted); window StripeWindow.
func Stripe(secrets ...string) Sender {
	return newSender(Sender{name: "Stripe", scheme: stripeHMAC, header: HeaderStripeSignature, encoding: Hex,
		keyField: "id", ignore: []string{"pending_webhooks"}, window: StripeWindow, tolerance: StripeTolerance}, secrets)
}

// Shopify is the sender of Shopify webhooks: X-Shopify-Hmac-Sha256 holds
// the base64 HMAC-SHA256 of the raw body with the app's client secret; the
// key is X-Shopify-Event-Id, which Shopify documents for detecting
// duplicates (a retry resends the original payload: the whole body is
// fingerprinted); window ShopifyWindow.
func Shopify(secrets ...string) Sender {
	return newSender(Sender{name: "Shopify", scheme: bodyHMAC, header: HeaderShopifyHMAC, encoding: Base64,
		keyHeader: HeaderShopifyEventID, window: ShopifyWindow}, secrets)
}

// HMACSpec describes a sender that signs the raw body with an HMAC-SHA256
// in one header, for HMAC.
type HMACSpec struct {
	// Name names the sender in errors and logs ("Acme").
	Name string
	// SignatureHeader is the header that carries the signature.
	SignatureHeader string
	// Prefix, if not empty, precedes the encoded signature in the header
	// ("sha256="); a signature without it is refused.
	Prefix string
	// Encoding is how the signature is written (Hex by default).
	Encoding Encoding
	// KeyHeader or KeyField (exactly one) names the sender's
	// duplicate-detection id: a header, or a field (a dotted path) of the
	// JSON body, the same on every delivery of one event.
	KeyHeader, KeyField string
	// Ignore are body fields (paths, as core.IgnoreFields takes them) that
	// the sender changes between deliveries of one event, left out of the
	// fingerprint.
	Ignore []string
	// Window is how long the sender may deliver one event again (its
	// retries, a manual redelivery): positive.
	Window time.Duration
}

// HMAC is a sender described by spec, signing with any of secrets.
func HMAC(spec HMACSpec, secrets ...string) Sender {
	s := Sender{name: spec.Name, scheme: bodyHMAC, header: spec.SignatureHeader, prefix: spec.Prefix, encoding: spec.Encoding,
		keyHeader: spec.KeyHeader, keyField: spec.KeyField, ignore: append([]string(nil), spec.Ignore...), window: spec.Window}
	switch {
	case spec.Name == "":
		s.err = errors.New("webhook: HMAC needs the sender's Name")
	case spec.SignatureHeader == "" || strings.ContainsAny(spec.SignatureHeader, " \t\r\n:,"):
		s.err = fmt.Errorf("webhook: %s: SignatureHeader %q is not a header name", spec.Name, spec.SignatureHeader)
	case (spec.KeyHeader == "") == (spec.KeyField == ""):
		s.err = fmt.Errorf("webhook: %s: give exactly one of KeyHeader and KeyField, the sender's duplicate-detection id", spec.Name)
	case spec.Window <= 0:
		s.err = fmt.Errorf("webhook: %s: Window %v must be positive: how long the sender may deliver one event again", spec.Name, spec.Window)
	case spec.Encoding != Hex && spec.Encoding != Base64:
		s.err = fmt.Errorf("webhook: %s: unknown Encoding %d", spec.Name, spec.Encoding)
	}
	return newSender(s, secrets)
}

// newSender is s with its secrets, which must be at least one, none empty.
func newSender(s Sender, secrets []string) Sender {
	if s.err == nil && len(secrets) == 0 {
		s.err = fmt.Errorf("webhook: %s needs at least one secret", s.name)
	}
	for _, sec := range secrets {
		if sec == "" && s.err == nil {
			s.err = fmt.Errorf("webhook: %s: an empty secret (is its environment variable set?)", s.name)
		}
		s.secrets = append(s.secrets, []byte(sec))
	}
	if s.err == nil {
		s.err = core.IgnoreFields(s.ignore...).Err()
	}
	return s
}

// WithWindow returns s with window d instead of the sender's documented one:
// a longer one for a sender that may deliver again for longer (GitHub
// Enterprise Server: 7 days), or, knowingly, a shorter one, which lets a
// runner whose retention is shorter than the sender's window be used (a
// delivery that comes after the record has expired then runs again). d must
// be positive.
func (s Sender) WithWindow(d time.Duration) Sender {
	if d <= 0 && s.err == nil {
		s.err = fmt.Errorf("webhook: %s: window %v must be positive", s.name, d)
	}
	s.window = d
	return s
}

// WithTolerance returns s with the tolerance d of a Stripe-Signature's
// timestamp (positive; StripeTolerance by default): a delivery whose
// timestamp is further than d from the wrapper's clock, either way, is
// refused. It is an error for another sender.
func (s Sender) WithTolerance(d time.Duration) Sender {
	switch {
	case s.err != nil:
	case s.scheme != stripeHMAC:
		s.err = fmt.Errorf("webhook: %s signs no timestamp: WithTolerance is for Stripe", s.name)
	case d <= 0:
		s.err = fmt.Errorf("webhook: %s: tolerance %v must be positive", s.name, d)
	}
	s.tolerance = d
	return s
}

// Name returns the sender's name ("GitHub", "Stripe", "Shopify", or
// HMACSpec.Name).
func (s Sender) Name() string { return s.name }

// Err returns the error of building s (a missing or empty secret, a bad
// spec or option), nil if it is usable. The wrappers' constructors return
// it.
func (s Sender) Err() error {
	if s.name == "" && s.err == nil {
		return errors.New("webhook: zero Sender: build one with GitHub, Stripe, Shopify or HMAC")
	}
	return s.err
}

// KeyHeader returns the header that holds the sender's duplicate-detection
// id, "" if the id is a body field (KeyField).
func (s Sender) KeyHeader() string { return s.keyHeader }

// KeyField returns the body field (a dotted path) that holds the sender's
// duplicate-detection id, "" if the id is a header (KeyHeader).
func (s Sender) KeyField() string { return s.keyField }

// Selection returns the fingerprint selection of the sender's bodies: the
// whole body, but the fields it changes between deliveries of one event.
func (s Sender) Selection() core.Selection { return core.IgnoreFields(s.ignore...) }

// Window returns how long the sender may deliver one event again.
func (s Sender) Window() time.Duration { return s.window }

// CheckRetention returns an error, naming both durations and the fix, if a
// runner keeping its records for retention would forget a delivery before
// the sender stops delivering it again (retention shorter than Window).
func (s Sender) CheckRetention(retention time.Duration) error {
	if retention >= s.window {
		return nil
	}
	return fmt.Errorf("webhook: %s may deliver one event again for %v, but the runner keeps its records for %v, after which a late delivery runs again: "+
		"give the runner idem.WithRetention(%s) or more, or accept the shorter window knowingly with the sender's WithWindow", s.name, s.window, retention, goDuration(s.window))
}

// goDuration writes d as Go source: "72*time.Hour".
func goDuration(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%d*time.Hour", d/time.Hour)
	}
	return fmt.Sprintf("%d*time.Second", (d+time.Second-1)/time.Second)
}
