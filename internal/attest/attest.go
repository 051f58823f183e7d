// Package attest verifies platform credentials that say which node a
// process is, independent of the certificate it presents: on Kubernetes,
// a projected ServiceAccount token bound to the worker's pod, checked with
// the TokenReview API. A pod can then be only the worker it is: the node
// ID a connection may write must equal the pod name in its token, as the
// NodeRestriction admission plugin binds a kubelet to its node.
//
// Invariants:
//
//   - A token is accepted only when the API server authenticates it for
//     Options.Audience, it belongs to one of Options.ServiceAccounts, and
//     it is bound to a pod (its pod-name extra is the attested node ID).
//     Legacy, unbound or other-audience tokens are refused.
//   - An attestation lasts until the token's exp claim and at most
//     Options.MaxAge from the Review call that returned it (a review, or a
//     cache hit within CacheTTL of one): a deleted pod's token stops
//     working at the API server, and a connection attested with it must
//     attest again within MaxAge.
//   - Reviews are bounded: at most Options.MaxInflight TokenReviews run at
//     once (a caller waits for a slot within its context), and results are
//     cached by the token's SHA-256 (accepted ones for CacheTTL, refused
//     ones for RefusedTTL), at most maxCache entries, so a flood of
//     connections with one token costs one review.
//   - The token is a secret: it is never logged, never part of an error,
//     and only its hash is kept.
//
// Errors wrap ErrRefused when the credential is not acceptable (not
// retryable) and ErrUnavailable when the API server could not answer
// (retryable).
//
// A Kube is safe for concurrent use and owns no goroutine.
package attest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talonhq/talon/internal/cluster"
)

// Sentinel errors.
var (
	// ErrRefused: the credential does not attest a node here.
	ErrRefused = errors.New("attestation refused")
	// ErrUnavailable: the verifier could not answer now; retry.
	ErrUnavailable = errors.New("attestation verifier unavailable")
)

// Extra keys the API server sets on a pod-bound ServiceAccount token.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// Defaults of Options.
const (
	DefaultAudience    = "talon"
	DefaultCacheTTL    = time.Minute
	DefaultRefusedTTL  = 10 * time.Second
	DefaultMaxAge      = 10 * time.Minute
	DefaultMaxInflight = 8
	maxCache           = 4096
)

// Attestation is a verified credential: the node it attests and until when.
type Attestation struct {
	NodeID  string    // the pod name
	Subject string    // the service account, namespace/name
	PodUID  string    // the pod's UID
	Expires time.Time // the end of the attestation
}

// TokenReviewer is the TokenReview client Kube needs; client-go's
// AuthenticationV1().TokenReviews() satisfies it.
type TokenReviewer interface {
	Create(ctx context.Context, tr *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// Options configures a Kube verifier.
type Options struct {
	Reviews TokenReviewer
	// Audience the token must be issued for (the pod's projected volume
	// sets it); default DefaultAudience.
	Audience string
	// ServiceAccounts are the accepted service accounts, namespace/name.
	ServiceAccounts []string
	CacheTTL        time.Duration
	RefusedTTL      time.Duration
	MaxAge          time.Duration
	MaxInflight     int
	Clock           func() time.Time
	Logger          *slog.Logger
}

// Kube verifies projected ServiceAccount tokens with TokenReview.
type Kube struct {
	opts  Options
	slots chan struct{}

	mu    sync.Mutex           // guards cache
	cache map[[32]byte]verdict // guarded by mu
}

// verdict is a cached review.
type verdict struct {
	a     Attestation
	err   error
	until time.Time
}

// New validates opts and returns a verifier; it contacts nothing.
func New(opts Options) (*Kube, error) {
	if opts.Reviews == nil || opts.Clock == nil || opts.Logger == nil {
		return nil, errors.New("attest: Reviews, Clock and Logger are required")
	}
	if len(opts.ServiceAccounts) == 0 {
		return nil, errors.New("attest: at least one service account (namespace/name) is required")
	}
	if opts.Audience == "" {
		opts.Audience = DefaultAudience
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	if opts.RefusedTTL <= 0 {
		opts.RefusedTTL = DefaultRefusedTTL
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.MaxInflight <= 0 {
		opts.MaxInflight = DefaultMaxInflight
	}
	return &Kube{opts: opts, slots: make(chan struct{}, opts.MaxInflight), cache: make(map[[32]byte]verdict)}, nil
}

// Review verifies token and returns what it attests.
func (k *Kube) Review(ctx context.Context, token []byte) (Attestation, error) {
	exp, err := expiry(token)
	if err != nil {
		return Attestation{}, err
	}
	now := k.opts.Clock()
	if !now.Before(exp) {
		return Attestation{}, fmt.Errorf("%w: the token expired at %s", ErrRefused, exp.UTC().Format(time.RFC3339))
	}
	sum := sha256.Sum256(token)
	if v, ok := k.cached(sum, now); ok {
		return v.a, v.err
	}
	select {
	case k.slots <- struct{}{}:
	case <-ctx.Done():
		return Attestation{}, fmt.Errorf("%w: %d token reviews in flight, the limit: %w", ErrUnavailable, cap(k.slots), ctx.Err())
	}
	defer func() { <-k.slots }()
	if v, ok := k.cached(sum, now); ok { // reviewed while this call waited
		return v.a, v.err
	}
	tr, err := k.opts.Reviews.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: string(token), Audiences: []string{k.opts.Audience}}}, metav1.CreateOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			// The coordinator's own credentials lack tokenreviews/create:
			// an operator error, retryable once the RBAC is fixed.
			return Attestation{}, fmt.Errorf("%w: TokenReview refused to this coordinator (does its service account have system:auth-delegator or tokenreviews create?): %w", ErrUnavailable, err)
		}
		return Attestation{}, fmt.Errorf("%w: TokenReview: %w", ErrUnavailable, err)
	}
	a, err := k.judge(tr, exp, now)
	ttl := k.opts.CacheTTL
	if err != nil {
		ttl = k.opts.RefusedTTL
	}
	k.remember(sum, verdict{a: a, err: err, until: now.Add(min(ttl, exp.Sub(now)))})
	return a, err
}

// judge turns a TokenReview answer into an attestation or a refusal.
func (k *Kube) judge(tr *authnv1.TokenReview, exp, now time.Time) (Attestation, error) {
	st := tr.Status
	if !st.Authenticated {
		reason := st.Error
		if reason == "" {
			reason = "not authenticated"
		}
		return Attestation{}, fmt.Errorf("%w: the API server did not accept the token for audience %q: %s", ErrRefused, k.opts.Audience, reason)
	}
	if !slices.Contains(st.Audiences, k.opts.Audience) {
		return Attestation{}, fmt.Errorf("%w: the token is not issued for audience %q (audiences %v)", ErrRefused, k.opts.Audience, st.Audiences)
	}
	sa, ok := strings.CutPrefix(st.User.Username, "system:serviceaccount:")
	if !ok {
		return Attestation{}, fmt.Errorf("%w: user %q is not a service account", ErrRefused, st.User.Username)
	}
	sa = strings.Replace(sa, ":", "/", 1)
	if !slices.Contains(k.opts.ServiceAccounts, sa) {
		return Attestation{}, fmt.Errorf("%w: service account %s is not a worker service account (worker-attestation-service-accounts %s)", ErrRefused, sa, strings.Join(k.opts.ServiceAccounts, ","))
	}
	pods := st.User.Extra[extraPodName]
	if len(pods) != 1 || pods[0] == "" {
		return Attestation{}, fmt.Errorf("%w: the token of %s is not bound to a pod: use a projected service account token volume", ErrRefused, sa)
	}
	if err := cluster.ValidateID("nodeId", pods[0]); err != nil {
		return Attestation{}, fmt.Errorf("%w: pod name %q is not a valid node ID: %w", ErrRefused, pods[0], err)
	}
	var uid string
	if u := st.User.Extra[extraPodUID]; len(u) == 1 {
		uid = u[0]
	}
	return Attestation{NodeID: pods[0], Subject: sa, PodUID: uid, Expires: minTime(exp, now.Add(k.opts.MaxAge))}, nil
}

func (k *Kube) cached(sum [32]byte, now time.Time) (verdict, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.cache[sum]
	if !ok || !now.Before(v.until) {
		return verdict{}, false
	}
	if v.err == nil {
		v.a.Expires = minTime(v.a.Expires, now.Add(k.opts.MaxAge))
	}
	return v, true
}

func (k *Kube) remember(sum [32]byte, v verdict) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.cache) >= maxCache {
		now := k.opts.Clock()
		for key, old := range k.cache { // drop the expired, else an arbitrary one
			if !now.Before(old.until) {
				delete(k.cache, key)
			}
		}
		for key := range k.cache {
			if len(k.cache) < maxCache {
				break
			}
			delete(k.cache, key)
		}
	}
	k.cache[sum] = v
}

// expiry returns the exp claim of a JWT without verifying it (TokenReview
// verifies); a token that is not a JWT with an exp is refused before any
// review.
func expiry(token []byte) (time.Time, error) {
	parts := strings.Split(string(token), ".")
	if len(parts) != 3 {
		return time.Time{}, fmt.Errorf("%w: the token is not a JWT (want header.payload.signature)", ErrRefused)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: the token's payload is not base64url", ErrRefused)
	}
	var claims struct {
		Exp *int64 `json:"exp"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil || claims.Exp == nil || *claims.Exp <= 0 {
		return time.Time{}, fmt.Errorf("%w: the token has no exp claim: use a projected service account token (expirationSeconds)", ErrRefused)
	}
	return time.Unix(*claims.Exp, 0), nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
