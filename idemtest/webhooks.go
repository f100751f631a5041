package idemtest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// GitHubDelivery returns a delivery of a GitHub webhook as GitHub sends it:
// POST /webhooks/github with the body (the event's JSON), the delivery's
// id in X-GitHub-Delivery (a GUID, the same when the delivery is
// redelivered: the key webhook.GitHub takes),
// the event's name in X-GitHub-Event, the hook's headers, and, when secret
// is not empty, X-Hub-Signature-256 (SignGitHub).
func GitHubDelivery(guid, event string, body []byte, secret string) Delivery {
	h := http.Header{}
	h.Set("Accept", "*/*")
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/5d2c8a1")
	h.Set("X-GitHub-Delivery", guid)
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Hook-ID", "481516234")
	h.Set("X-GitHub-Hook-Installation-Target-ID", "90817263")
	h.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
	if secret != "" {
		h.Set("X-Hub-Signature-256", SignGitHub(secret, body))
	}
	return Delivery{Method: http.MethodPost, Path: "/webhooks/github", Header: h, Body: body}
}

// SignGitHub returns the X-Hub-Signature-256 of body under the webhook's
// secret, as GitHub computes it: "sha256=" and the hex HMAC-SHA256 of the
// body with the secret as key
// (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
func SignGitHub(secret string, body []byte) string {
	return "sha256=" + hex.EncodeToString(hmacSHA256(secret, body))
}

// StripeEvent returns the body of a Stripe event as Stripe sends it: the
// event id (evt_..., the key webhook.Stripe takes), its type, the object
// it is about (JSON) and pending_webhooks, the count of endpoints still to
// answer, which can differ between two deliveries of the event
// (webhook.Stripe leaves it out of the fingerprint).
func StripeEvent(id, eventType, object string, pendingWebhooks int) []byte {
	return []byte(`{"id":"` + id + `","object":"event","api_version":"2024-06-20","created":` + strconv.FormatInt(SentAt.Unix(), 10) +
		`,"data":{"object":` + object + `},"livemode":false,"pending_webhooks":` + strconv.Itoa(pendingWebhooks) +
		`,"request":{"id":null,"idempotency_key":null},"type":"` + eventType + `"}`)
}

// StripeDelivery returns a delivery of a Stripe event (StripeEvent) as
// Stripe sends it: POST /webhooks/stripe with the body and, when secret
// (the endpoint's signing secret, whsec_...) is not empty, Stripe-Signature
// for the time at (SignStripe). Stripe signs every attempt anew: a retry
// of the same event has another timestamp and signature, and the same id
// in the body.
func StripeDelivery(body []byte, secret string, at time.Time) Delivery {
	h := http.Header{}
	h.Set("Accept", "*/*; q=0.5, application/xml")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	if secret != "" {
		h.Set("Stripe-Signature", SignStripe(secret, body, at))
	}
	return Delivery{Method: http.MethodPost, Path: "/webhooks/stripe", Header: h, Body: body}
}

// SignStripe returns the Stripe-Signature of body signed at the time at
// under the endpoint's signing secret, as Stripe computes it: "t=" and the
// Unix time, ",v1=" and the hex HMAC-SHA256, with the secret as key, of
// the time, a period and the body
// (https://docs.stripe.com/webhooks#verify-manually).
func SignStripe(secret string, body []byte, at time.Time) string {
	t := strconv.FormatInt(at.Unix(), 10)
	signed := append([]byte(t+"."), body...)
	return fmt.Sprintf("t=%s,v1=%s", t, hex.EncodeToString(hmacSHA256(secret, signed)))
}

// ShopifyDelivery returns a delivery of a Shopify webhook as Shopify sends
// it: POST /webhooks/shopify with the body, the shop's domain in
// X-Shopify-Shop-Domain, the topic, the event's id in X-Shopify-Event-Id
// (the same on every delivery of the event: the key webhook.Shopify takes),
// a webhook id derived from it in X-Shopify-Webhook-Id, the API version,
// the time it was triggered, and, when secret (the app's client secret) is
// not empty, X-Shopify-Hmac-Sha256 (SignShopify).
func ShopifyDelivery(shop, topic, eventID string, body []byte, secret string) Delivery {
	h := http.Header{}
	h.Set("Accept", "*/*")
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "Shopify-Captain-Hook")
	h.Set("X-Shopify-Api-Version", "2025-01")
	h.Set("X-Shopify-Event-Id", eventID)
	h.Set("X-Shopify-Shop-Domain", shop)
	h.Set("X-Shopify-Topic", topic)
	h.Set("X-Shopify-Triggered-At", SentAt.Format(time.RFC3339Nano))
	h.Set("X-Shopify-Webhook-Id", hex.EncodeToString(hmacSHA256("webhook-id", []byte(eventID))[:16]))
	if secret != "" {
		h.Set("X-Shopify-Hmac-Sha256", SignShopify(secret, body))
	}
	return Delivery{Method: http.MethodPost, Path: "/webhooks/shopify", Header: h, Body: body}
}

// SignShopify returns the X-Shopify-Hmac-Sha256 of body under the app's
// client secret, as Shopify computes it: the base64 (standard encoding)
// HMAC-SHA256 of the raw body with the secret as key
// (https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook).
func SignShopify(secret string, body []byte) string {
	return base64.StdEncoding.EncodeToString(hmacSHA256(secret, body))
}

func hmacSHA256(secret string, msg []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(msg)
	return m.Sum(nil)
}
