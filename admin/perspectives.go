package admin

import (
	"context"

	"github.com/hallmark-ca/hallmark/store"
)

// perspectives are the network perspectives' answers of each challenge of
// authzs, by challenge ID; a challenge not corroborated has none. A
// perspective asked but absent did not answer by its deadline.
func (s *Server) perspectives(ctx context.Context, authzs []*store.Authorization) (map[string][]store.PerspectiveAnswer, error) {
	out := map[string][]store.PerspectiveAnswer{}
	for _, a := range authzs {
		for _, ch := range a.Challenges {
			answers, _, err := s.st.pages.PerspectiveAnswers(ctx, ch.ID)
			if err != nil {
				return nil, err
			}
			if len(answers) > 0 {
				out[ch.ID] = answers
			}
		}
	}
	return out, nil
}
