// Package jobs implements the operator's cache jobs in talonctl: `warm`
// and `free` (start one, optionally wait for it with a progress bar) and
// `jobs list|get|cancel`. Every request goes to the coordinators' /api/v1
// (the --server addresses); nothing is sent to an address a worker
// advertises: the coordinators hand the job to the workers over their
// control connections.
//
// Invariants: a job's requests go to the --server addresses only; --wait
// reads the job every --interval until it ends and exits 1 unless it
// ended done; a bad argument is a usage error (exit 2) naming the limit
// before any request is sent. jobs.go holds warm and free, manage.go the
// jobs noun.
package jobs
