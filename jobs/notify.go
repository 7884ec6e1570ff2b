package jobs

import (
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// KindNotifySend delivers one event to one notification destination.
const KindNotifySend = "notify_send"

// QueueNotify carries notify_send jobs: a receiver that is slow or down
// holds up no validation, signing or housekeeping.
const QueueNotify = "notify"

// NotifyMaxAttempts is how often a notify_send job is tried before River
// discards it (visibly, in `hallmark jobs`). With the client's backoff
// (doubling from 1 s, capped at 5 min, jittered) that is about two to
// three hours: a receiver down for a maintenance window loses nothing.
const NotifyMaxAttempts = 40

// everyState makes a notify_send job unique for as long as River keeps
// it, finished or not: an event is delivered to a destination once, even
// when the write that reports it is replayed.
var everyState = []rivertype.JobState{
	rivertype.JobStateAvailable,
	rivertype.JobStateCancelled,
	rivertype.JobStateCompleted,
	rivertype.JobStateDiscarded,
	rivertype.JobStatePending,
	rivertype.JobStateRetryable,
	rivertype.JobStateRunning,
	rivertype.JobStateScheduled,
}

// NotifySendArgs is one event for one destination, with what its message
// templates show. Event, Destination and Key (the event's subject: a
// serial, an account or challenge id, or serial and threshold for
// certificate_expiring) make it unique, and Key is the idempotency key a
// receiver sees.
type NotifySendArgs struct {
	Event       string    `json:"event" river:"unique"`
	Destination string    `json:"destination" river:"unique"`
	Key         string    `json:"key" river:"unique"`
	Subject     string    `json:"subject"`
	Account     string    `json:"account,omitempty"`
	Actor       string    `json:"actor,omitempty"`
	Detail      string    `json:"detail,omitempty"`
	Names       []string  `json:"names,omitempty"`
	NotAfter    time.Time `json:"not_after,omitzero"`
	At          time.Time `json:"at"`
}

func (NotifySendArgs) Kind() string { return KindNotifySend }

func (NotifySendArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueNotify, MaxAttempts: NotifyMaxAttempts,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: everyState}}
}
