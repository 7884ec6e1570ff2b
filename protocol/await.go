package protocol

import (
	"context"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/protocol/verdict"
	"github.com/hallmark-ca/hallmark/store"
)

// Verdicts tells a request when the worker's verdict on a subject (a
// challenge's or an order's ID) may have come: protocol/verdict.Hub, fed
// by store/open.DB.WatchVerdicts.
type Verdicts interface {
	// Mark is the point to wait from, taken before the subject is read.
	Mark() verdict.Mark
	// Wait's channel closes when a verdict on subjectID may have come
	// since since; the wait ends with ctx.
	Wait(ctx context.Context, subjectID string, since verdict.Mark) <-chan struct{}
}

// admission is a request's admission permit (server.max_concurrent_requests),
// which it gives back while it waits for a verdict. Only the request's
// goroutine uses it.
type admission struct {
	s    *Server
	held bool
}

type admissionKey struct{}

// take takes a permit if one is free, never waiting for one.
func (a *admission) take() bool {
	if a.held {
		return true
	}
	select {
	case a.s.permits <- struct{}{}:
		a.held = true
		a.s.metrics.inFlight.Inc()
		return true
	default:
		return false
	}
}

func (a *admission) release() {
	if a.held {
		<-a.s.permits
		a.held = false
		a.s.metrics.inFlight.Dec()
	}
}

// awaitVerdict waits for the worker's verdict on subject, read processing
// by p, for at most server.verdict_wait_ms, with no admission permit and
// no database connection: the request does no work meanwhile, only waits
// for its frontend's one listener (Verdicts) to say the verdict may have
// come. Then, holding a permit again, it runs reread, which reads the
// subject afresh (the answer is built from that read, never from the
// notification) and reports whether it is still processing; still
// processing with time left, it waits again. A wait that times out, or a
// wake-up with no permit free to read with, leaves the caller's state as
// it was read: the answer says processing, with Retry-After, as without
// the wait (RFC 8555 §7.1.6 and §7.4 allow either answer).
func (s *Server) awaitVerdict(p *post, subject string, reread func(ctx context.Context) (processing bool, err error)) error {
	adm, _ := p.r.Context().Value(admissionKey{}).(*admission)
	if s.verdicts == nil || s.cfg.Server.VerdictWaitMS <= 0 || adm == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(p.r.Context(), s.cfg.Server.VerdictWait())
	defer cancel()
	s.metrics.verdictWaiting.Inc()
	defer s.metrics.verdictWaiting.Dec()
	since := p.mark
	for {
		woke := s.verdicts.Wait(ctx, subject, since)
		adm.release()
		select {
		case <-woke:
		case <-ctx.Done():
			s.metrics.verdictWaits.WithLabelValues("timeout").Inc()
			return nil
		}
		if !adm.take() {
			s.metrics.verdictWaits.WithLabelValues("busy").Inc()
			return nil
		}
		since = s.verdicts.Mark()
		processing, err := reread(p.r.Context())
		if err != nil {
			// The subject was read, and a POST's claim committed, before
			// the wait: answering that state keeps a client that would
			// retry on a 503 from meeting the finalize it already made.
			s.metrics.verdictWaits.WithLabelValues("error").Inc()
			s.log.Warn("verdict not read after the wait; answering the state as read", "subject", subject, "err", err)
			return nil
		}
		if !processing {
			s.metrics.verdictWaits.WithLabelValues("verdict").Inc()
			return nil
		}
	}
}

// mark is the point a request's wait for a verdict starts from, taken
// before its first read of the subject.
func (s *Server) mark() verdict.Mark {
	if s.verdicts == nil {
		return 0
	}
	return s.verdicts.Mark()
}

// settledChallenge is c, processing, as it stands once its verdict came
// (awaitVerdict), or as it was.
func (s *Server) settledChallenge(p *post, c *store.Challenge) (*store.Challenge, error) {
	if c.Status != acme.StatusProcessing {
		return c, nil
	}
	err := s.awaitVerdict(p, c.ID, func(ctx context.Context) (bool, error) {
		cur, err := s.st.verify.ChallengeWithAuthz(ctx, c.ID)
		if err != nil {
			return false, s.storeErr(err, "reading the challenge after its verdict")
		}
		c = &cur.Challenge
		return c.Status == acme.StatusProcessing, nil
	})
	return c, err
}

// settledOrder is o, processing, as it stands once the worker issued or
// failed it, or as it was.
func (s *Server) settledOrder(p *post, o *store.Order) (*store.Order, error) {
	if o.Status != acme.StatusProcessing {
		return o, nil
	}
	err := s.awaitVerdict(p, o.ID, func(ctx context.Context) (bool, error) {
		cur, err := s.st.verify.OrderByID(ctx, o.ID)
		if err != nil {
			return false, s.storeErr(err, "reading the order after its issuance")
		}
		o = cur
		return o.Status == acme.StatusProcessing, nil
	})
	return o, err
}

// settledAuthz is a, pending while one of its challenges is processing,
// as it stands once that challenge's verdict came, or as it was.
func (s *Server) settledAuthz(p *post, a *store.Authorization) (*store.Authorization, error) {
	chall := processingChallenge(a)
	if chall == "" {
		return a, nil
	}
	err := s.awaitVerdict(p, chall, func(ctx context.Context) (bool, error) {
		cur, err := s.st.verify.AuthzByID(ctx, a.ID)
		if err != nil {
			return false, s.storeErr(err, "reading the authorization after its validation")
		}
		a = authzAsSeen(cur, p.now)
		chall = processingChallenge(a)
		return chall != "", nil
	})
	return a, err
}

// processingChallenge is the ID of a pending authorization's challenge
// being validated, "" when none is (or a is not pending).
func processingChallenge(a *store.Authorization) string {
	if a.Status != acme.StatusPending {
		return ""
	}
	for i := range a.Challenges {
		if a.Challenges[i].Status == acme.StatusProcessing {
			return a.Challenges[i].ID
		}
	}
	return ""
}
