package providers

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"time"

	"github.com/hookline/hookline/pkg/providers/glob"
	"github.com/hookline/hookline/pkg/providers/keys"
	"github.com/hookline/hookline/pkg/providers/rule"
	"github.com/hookline/hookline/pkg/providers/signature"
)

// Preset names, the values of a provider's preset field.
const (
	PresetStripe     = "stripe"
	PresetGitHub     = "github"
	PresetShopify    = "shopify"
	PresetStandard   = "standard"
	PresetSlack      = "slack"
	PresetGoCardless = "gocardless"
	PresetCalcom     = "calcom"
	PresetRetell     = "retell"
	PresetGeneric    = "generic"
)

// Presets lists the preset names, sorted. Cost: a new slice of nine
// strings.
func Presets() []string {
	return []string{PresetCalcom, PresetGeneric, PresetGitHub, PresetGoCardless, PresetRetell, PresetShopify, PresetSlack, PresetStandard, PresetStripe}
}

// The headers github and shopify take the key and event type from, as the
// providers spell them (http.Header canonicalises on lookup).
const (
	headerGitHubDelivery   = "X-GitHub-Delivery"
	headerGitHubEvent      = "X-GitHub-Event"
	headerShopifyWebhookID = "X-Shopify-Webhook-Id"
	headerShopifyTopic     = "X-Shopify-Topic"
)

// Media types accepted by CheckContentType.
const (
	mediaJSON = "application/json"
	mediaForm = "application/x-www-form-urlencoded"
	mediaXML  = "application/xml"
)

// preset is everything a provider of one kind shares: how it signs, what it
// sends, how its deliveries become records and which headers travel on.
type preset struct {
	scheme *signature.Scheme // nil for generic: built from the provider's config
	// accept lists the media types the provider sends; nil accepts any.
	accept []string
	events eventsFunc
	// keyHeaders are the request headers the idempotency key or the event
	// type is read from; none for a preset that reads both from the body.
	keyHeaders []string
	forward    []string // lower-case header names copied to records
	// keyDocs describe keyHeaders as the HTTP document lists them, the
	// one a delivery cannot do without marked Required.
	keyDocs []RequestHeader
	// keyParts and typeRule key and type a preset's deliveries as a
	// generic provider's parts and event_type would (retell); nil for the
	// presets with events functions of their own.
	keyParts []keys.Part
	typeRule *rule.Rule
	// standardSecret: secrets are whsec_<base64> and the key is the decoded
	// bytes.
	standardSecret bool
}

// timestamped reports whether the preset signs a timestamp, so that a
// tolerance applies.
func (p preset) timestamped() bool { return p.scheme != nil && p.scheme.Timestamped() }

// decodeSecret turns an environment value into key bytes.
func (p preset) decodeSecret(raw []byte) (signature.Secret, error) {
	if p.standardSecret {
		return signature.DecodeStandardSecret(raw)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("secret is empty")
	}
	return signature.Secret(raw), nil
}

// presetFor returns the preset called name. Each call builds fresh values, so
// nothing here is shared mutable state.
func presetFor(name string) (preset, bool) {
	switch name {
	case PresetStripe:
		return preset{
			scheme:  signature.Stripe(),
			accept:  []string{mediaJSON},
			events:  stripeEvents,
			forward: []string{"stripe-signature"},
		}, true
	case PresetGitHub:
		return preset{
			scheme:     signature.Single("X-Hub-Signature-256", "sha256=", sha256.New, signature.Hex),
			accept:     []string{mediaJSON, mediaForm},
			events:     headerEvents(headerGitHubDelivery, headerGitHubEvent),
			keyHeaders: []string{headerGitHubDelivery, headerGitHubEvent},
			keyDocs: []RequestHeader{
				{Name: headerGitHubDelivery, Required: true, Description: "The delivery id: the idempotency key is `<name>:<it>` (400 without it)."},
				{Name: headerGitHubEvent, Description: "The event type."},
			},
			forward: []string{"x-github-delivery", "x-github-event", "x-github-hook-id", "x-hub-signature-256", "user-agent"},
		}, true
	case PresetShopify:
		return preset{
			scheme:     signature.Single("X-Shopify-Hmac-Sha256", "", sha256.New, signature.Base64),
			accept:     []string{mediaJSON, mediaXML},
			events:     headerEvents(headerShopifyWebhookID, headerShopifyTopic),
			keyHeaders: []string{headerShopifyWebhookID, headerShopifyTopic},
			keyDocs: []RequestHeader{
				{Name: headerShopifyWebhookID, Required: true, Description: "The webhook id: the idempotency key is `<name>:<it>` (400 without it)."},
				{Name: headerShopifyTopic, Description: "The event type."},
			},
			forward: []string{"x-shopify-hmac-sha256", "x-shopify-webhook-id", "x-shopify-topic",
				"x-shopify-shop-domain", "x-shopify-api-version", "x-shopify-triggered-at"},
		}, true
	case PresetStandard:
		return preset{
			scheme:         signature.Standard(),
			events:         standardEvents,
			keyHeaders:     []string{signature.HeaderWebhookID, signature.HeaderSvixID},
			forward:        []string{"webhook-id", "webhook-timestamp", "webhook-signature", "svix-id", "svix-timestamp", "svix-signature"},
			standardSecret: true,
		}, true
	case PresetSlack:
		return preset{
			scheme:  signature.Slack(),
			accept:  []string{mediaJSON, mediaForm},
			events:  slackEvents,
			forward: []string{"x-slack-signature", "x-slack-request-timestamp", "x-slack-retry-num", "x-slack-retry-reason"},
		}, true
	case PresetGoCardless:
		return preset{
			scheme:  signature.Single("Webhook-Signature", "", sha256.New, signature.Hex),
			accept:  []string{mediaJSON},
			events:  gocardlessEvents,
			forward: []string{"webhook-signature", "origin"},
		}, true
	case PresetCalcom:
		return preset{
			scheme:  signature.Single("X-Cal-Signature-256", "", sha256.New, signature.Hex),
			accept:  []string{mediaJSON},
			events:  calcomEvents,
			forward: []string{"x-cal-signature-256"},
		}, true
	case PresetRetell:
		typ := rule.MustJSON("/event")
		return preset{
			scheme:  signature.Retell(),
			accept:  []string{mediaJSON},
			events:  genericEvents,
			forward: []string{"x-retell-signature"},
			// Seed 000's rule: the event, the call id (call.call_id, else
			// call_id; else the body's hash, as for call_inbound, which has
			// no call id) and, for call_ended only, call.end_timestamp
			// (empty when absent).
			keyParts: []keys.Part{
				{Alts: []*rule.Rule{typ}},
				{Alts: []*rule.Rule{rule.MustJSON("/call/call_id"), rule.MustJSON("/call_id")}, BodyHash: true},
				{Alts: []*rule.Rule{rule.MustJSON("/call/end_timestamp")}, Optional: true, Events: []glob.Glob{glob.MustCompile("call_ended")}},
			},
			typeRule: typ,
		}, true
	case PresetGeneric:
		return preset{events: genericEvents}, true
	}
	return preset{}, false
}

// Sign sets on h the signature headers a provider of this preset would send
// for body at now, signed with secret given as it would sit in the
// environment variable (for standard, "whsec_<base64>" or bare base64). The
// standard preset keeps a webhook-id already in h and makes one otherwise.
// Delivery-id and event headers (X-GitHub-Delivery, ...) are the caller's to
// set. For generic use signature.SignGeneric or (*Provider).Sign. Cost: one HMAC over
// the body.
func Sign(preset string, secret []byte, body []byte, now time.Time, h http.Header) error {
	if preset == PresetGeneric {
		return fmt.Errorf("sign: preset generic needs its signature config: use SignGeneric or (*Provider).Sign")
	}
	p, ok := presetFor(preset)
	if !ok {
		return fmt.Errorf("sign: unknown preset %q", preset)
	}
	key, err := p.decodeSecret(secret)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	p.scheme.Sign(key, body, now, h)
	return nil
}
