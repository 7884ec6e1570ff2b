package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// perspectiveRow is one network perspective's answer on a challenge, as
// `orders show` prints it: the primary's own check and each remote
// perspective's (CA/B BR §3.2.2.9).
type perspectiveRow struct {
	Perspective string          `json:"perspective"`
	Outcome     string          `json:"outcome"`
	TookMS      float64         `json:"took_ms"`
	AnsweredAt  string          `json:"answered_at"`
	Problem     *acme.Problem   `json:"problem,omitempty"`
	Record      json.RawMessage `json:"record,omitempty"`
}

// perspectiveRows reads a challenge's perspective answers; none when its
// validation was not corroborated.
func perspectiveRows(ctx context.Context, st cliStore, challengeID string) ([]perspectiveRow, error) {
	answers, _, err := st.PerspectiveAnswers(ctx, challengeID)
	if err != nil {
		return nil, err
	}
	rows := make([]perspectiveRow, 0, len(answers))
	for _, a := range answers {
		rows = append(rows, perspectiveRow{Perspective: a.Perspective, Outcome: a.Outcome, TookMS: float64(a.Took.Microseconds()) / 1000,
			AnsweredAt: when(a.At), Problem: a.Problem, Record: a.Record})
	}
	return rows, nil
}

// printPerspectives prints the perspectives' answers of every challenge
// that has some. A perspective asked but absent did not answer in time.
func printPerspectives(s *session, d orderDetail) {
	var rows [][]string
	for _, a := range d.Authorizations {
		for _, ch := range a.Challenges {
			for _, p := range ch.Perspectives {
				e := "-"
				if p.Problem != nil {
					e = string(p.Problem.Type) + ": " + p.Problem.Detail
				}
				rows = append(rows, []string{ch.ID, p.Perspective, p.Outcome, fmt.Sprintf("%.1f ms", p.TookMS), p.AnsweredAt, e})
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	s.printf("\nnetwork perspectives (a perspective asked but not listed did not answer by the deadline):\n")
	s.table([]string{"CHALLENGE", "PERSPECTIVE", "OUTCOME", "TOOK", "ANSWERED", "PROBLEM"}, rows)
}
