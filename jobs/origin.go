package jobs

import (
	"context"
	"encoding/json"

	"github.com/riverqueue/river"

	"github.com/hallmark-ca/hallmark/protocol/origin"
)

// originKey is the member of a job's River metadata that holds the
// origin of the request that queued it.
const originKey = "origin"

// originMetadata is the metadata member a job carries.
type originMetadata struct {
	Origin *origin.Origin `json:"origin,omitempty"`
}

// insertOpts are the options a job queued under ctx is inserted with: the
// origin ctx carries (a request's) as its metadata, so the handler's log
// lines and trail records name the request; nil when ctx carries none.
// The job's own InsertOpts (queue, uniqueness) still apply: River takes
// each option from these only where they set it, and uniqueness is by
// args, never by metadata.
func insertOpts(ctx context.Context) *river.InsertOpts {
	o := origin.FromContext(ctx)
	if o == nil || o.IsZero() {
		return nil
	}
	b, err := json.Marshal(originMetadata{Origin: o})
	if err != nil {
		return nil // unreachable: an Origin is strings
	}
	return &river.InsertOpts{Metadata: b}
}

// originOf reads the origin from a job's metadata; the zero Origin for a
// job queued without one, or metadata that does not say.
func originOf(metadata []byte) origin.Origin {
	var m originMetadata
	if json.Unmarshal(metadata, &m) != nil || m.Origin == nil {
		return origin.Origin{}
	}
	return *m.Origin
}

// withOrigin is ctx carrying a job's origin, for its handler: its log
// lines name the request, and a job it queues carries the origin on.
func withOrigin(ctx context.Context, o origin.Origin) context.Context {
	if o.IsZero() {
		return ctx
	}
	return origin.NewContext(ctx, &o)
}
