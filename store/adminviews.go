package store

import (
	"context"
	"time"
)

// AdminViews are the read-only summaries the admin panel shows: counts that
// would otherwise need a full listing, and a paginated view of the job
// queue. They never change a record.
type AdminViews interface {
	// Counts counts accounts and orders by status and certificates.
	Counts(ctx context.Context) (Counts, error)
	// QueueDepth counts River's jobs by kind and state, and names the
	// oldest job still waiting to run (0 when none waits).
	QueueDepth(ctx context.Context) (QueueDepth, error)
	// JobIDs pages through job ids, newest first, narrowed by kind and
	// state ("" matches any); details come from jobs.Show.
	JobIDs(ctx context.Context, f JobFilter, p Page) ([]int64, string, error)
	// Issuers lists every issuer id the store knows of: published issuer
	// certificates, certificates' issuers and CRLs' issuers, sorted.
	Issuers(ctx context.Context) ([]string, error)
	// Activity counts, an hour at a time, the last hours hours (1 to
	// MaxActivityHours) up to the current one on the database's clock.
	Activity(ctx context.Context, hours int) (Activity, error)
}

// MaxActivityHours bounds Activity's window.
const MaxActivityHours = 24 * 7

// Activity is the recent history the overview charts. Each slice holds
// one count an hour, oldest first; the last is the current hour.
type Activity struct {
	Start   time.Time // the first hour's start, UTC
	Issued  []int64   // certificates issued
	Valid   []int64   // challenges validated
	Invalid []int64   // challenges that failed validation (the trail's validation.failed)
	// JobsCompleted and JobsFailed are River jobs finalized: completed;
	// discarded or cancelled.
	JobsCompleted []int64
	JobsFailed    []int64
}

// Counts is the overview's record counts.
type Counts struct {
	Accounts     map[string]int64 // by status
	Orders       map[string]int64 // by status
	Certificates int64
	Revoked      int64
	Expired      int64 // not_after in the past, on the database's clock
}

// QueueDepth is the job queue at a glance.
type QueueDepth struct {
	Rows []QueueCount
	// OldestWaitingID is the lowest id among available, scheduled,
	// retryable and pending jobs; 0 when none waits.
	OldestWaitingID int64
}

// QueueCount is the number of jobs of one kind in one state.
type QueueCount struct {
	Kind  string
	State string
	Count int64
}

// JobFilter narrows JobIDs; empty fields match everything.
type JobFilter struct {
	Kind  string
	State string
}
