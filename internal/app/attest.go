package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/talonhq/talon/internal/attest"
	"github.com/talonhq/talon/internal/config"
	"github.com/talonhq/talon/internal/coordinator"
	"github.com/talonhq/talon/internal/protocol"
	"github.com/talonhq/talon/internal/state/kube"
)

// coordinatorAttest returns the coordinator's attestation verifier, nil
// when worker-attestation is off.
func coordinatorAttest(cfg *config.Config, log *slog.Logger) (func(context.Context, []byte) (coordinator.Attestation, error), error) {
	if cfg.Attestation.Mode != config.AttestationKubernetes {
		return nil, nil
	}
	rc, err := kube.LoadRESTConfig(cfg.Kube.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("worker-attestation kubernetes: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("worker-attestation kubernetes: %w", err)
	}
	v, err := attest.New(attest.Options{
		Reviews: cs.AuthenticationV1().TokenReviews(), Audience: cfg.Attestation.Audience,
		ServiceAccounts: cfg.WorkerServiceAccounts(), Clock: time.Now, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	log.Info("worker attestation on: worker writes need a pod-bound service account token", "service_accounts", cfg.WorkerServiceAccounts(), "audience", cfg.Attestation.Audience)
	return func(ctx context.Context, token []byte) (coordinator.Attestation, error) {
		a, err := v.Review(ctx, token)
		if errors.Is(err, attest.ErrRefused) {
			return coordinator.Attestation{}, refusedAttestation{err}
		}
		if err != nil {
			return coordinator.Attestation{}, err
		}
		return coordinator.Attestation{NodeID: a.NodeID, Subject: a.Subject, Expires: a.Expires}, nil
	}, nil
}

// refusedAttestation is an attest refusal as the coordinator's sentinel.
type refusedAttestation struct{ error }

func (refusedAttestation) Is(target error) bool { return target == coordinator.ErrAttestationRefused }

// workerAttest returns the OnConnect hook that attests each new
// connection with the token in file (nil when file is empty). A refusal
// by the coordinator (attestation off there, or the token refused) leaves
// the connection unattested and is logged: where attestation is required
// the writes are then refused with the reason. A retryable answer fails
// the attempt, so the client tries the next coordinator.
func workerAttest(file string, log *slog.Logger) func(context.Context, *protocol.Conn) (time.Time, error) {
	if file == "" {
		return nil
	}
	return func(ctx context.Context, cn *protocol.Conn) (time.Time, error) {
		tok, err := readToken(file)
		if err != nil {
			return time.Time{}, err
		}
		resp, err := cn.Call(ctx, &protocol.Attest{Token: tok})
		var pe *protocol.Error
		if errors.As(err, &pe) && !pe.Retryable && !errors.Is(err, protocol.ErrConnBroken) {
			log.Warn("coordinator did not accept the attestation; continuing unattested", "code", pe.Code.String(), "reason", pe.Message)
			return time.Time{}, nil
		}
		if err != nil {
			return time.Time{}, err
		}
		a, ok := resp.(*protocol.Attested)
		if !ok {
			return time.Time{}, fmt.Errorf("attest: unexpected answer %s", resp.Type())
		}
		log.Debug("connection attested", "node", a.NodeID, "expires", a.Expires())
		return a.Expires(), nil
	}
}

// readToken reads a projected token: a regular file of 1 to
// protocol.MaxAttestTokenBytes bytes, surrounding whitespace trimmed.
func readToken(file string) ([]byte, error) {
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("attestation-token-file: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("attestation-token-file %s: not a regular file", file)
	}
	b, err := io.ReadAll(io.LimitReader(f, protocol.MaxAttestTokenBytes+1))
	if err != nil {
		return nil, fmt.Errorf("attestation-token-file %s: %w", file, err)
	}
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0:
		return nil, fmt.Errorf("attestation-token-file %s: empty", file)
	case len(b) > protocol.MaxAttestTokenBytes:
		return nil, fmt.Errorf("attestation-token-file %s: over the %d byte limit", file, protocol.MaxAttestTokenBytes)
	}
	return b, nil
}
