package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hallmark-ca/hallmark/jobs"
	"github.com/hallmark-ca/hallmark/store"
)

const perspectiveInsertSQL = `INSERT INTO perspective_answers (challenge_id, perspective, outcome, problem, record, took_us)
VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (challenge_id, perspective) DO NOTHING`

func (s *Store) PerspectivesAsk(ctx context.Context, primary store.PerspectiveAnswer, names []string) (bool, error) {
	var asked bool
	err := s.inTx(ctx, func(t *txn) error {
		n, err := s.insertAnswer(ctx, t, primary)
		if err != nil || n == 0 {
			asked = false
			return err
		}
		for _, name := range names {
			if err := s.enqueue(ctx, t, jobs.PerspectiveCheckArgs{ChallengeID: primary.ChallengeID, Perspective: name}); err != nil {
				return err
			}
		}
		asked = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("asking the perspectives about challenge %s: %w", primary.ChallengeID, err)
	}
	return asked, nil
}

func (s *Store) PerspectiveAnswer(ctx context.Context, a store.PerspectiveAnswer) error {
	err := s.inTx(ctx, func(t *txn) error {
		_, err := s.insertAnswer(ctx, t, a)
		return err
	})
	if err != nil {
		return fmt.Errorf("recording perspective %s's answer on challenge %s: %w", a.Perspective, a.ChallengeID, err)
	}
	return nil
}

func (s *Store) insertAnswer(ctx context.Context, t *txn, a store.PerspectiveAnswer) (int64, error) {
	pt, err := problemText(a.Problem)
	if err != nil {
		return 0, err
	}
	return t.exec(ctx, perspectiveInsertSQL, a.ChallengeID, a.Perspective, a.Outcome, pt, string(a.Record), a.Took.Microseconds())
}

func (s *Store) PerspectiveAnswers(ctx context.Context, challengeID string) ([]store.PerspectiveAnswer, time.Time, error) {
	var out []store.PerspectiveAnswer
	var now time.Time
	err := s.autocommit(ctx, func(t *txn) error {
		out = out[:0]
		if err := t.queryRow(ctx, `SELECT {now}`).Scan(ts(&now)); err != nil {
			return err
		}
		return collect(ctx, t, func(r Rows) error {
			var a store.PerspectiveAnswer
			var pt, rec string
			var took int64
			if err := r.Scan(&a.ChallengeID, &a.Perspective, &a.Outcome, &pt, &rec, &took, ts(&a.At)); err != nil {
				return err
			}
			p, err := parseProblem(pt)
			if err != nil {
				return err
			}
			a.Problem, a.Took = p, time.Duration(took)*time.Microsecond
			if rec != "" {
				a.Record = []byte(rec)
			}
			out = append(out, a)
			return nil
		}, `SELECT challenge_id, perspective, outcome, problem, record, took_us, answered_at FROM perspective_answers
WHERE challenge_id = $1 ORDER BY perspective <> 'primary', perspective`, challengeID)
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("reading the perspectives' answers on challenge %s: %w", challengeID, err)
	}
	return out, now, nil
}

func (s *Store) AuthzProfiles(ctx context.Context, authzID string) ([]string, error) {
	var out []string
	err := s.autocommit(ctx, func(t *txn) error {
		out = out[:0]
		return collect(ctx, t, func(r Rows) error {
			var p string
			if err := r.Scan(&p); err != nil {
				return err
			}
			out = append(out, p)
			return nil
		}, `SELECT DISTINCT o.profile FROM order_authz oa JOIN orders o ON o.id = oa.order_id WHERE oa.authz_id = $1 ORDER BY o.profile`, authzID)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the profiles of authorization %s's orders: %w", authzID, err)
	}
	return out, nil
}
