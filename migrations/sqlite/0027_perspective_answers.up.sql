-- perspective_answers are the network perspectives' answers for one
-- challenge (CA/B BR §3.2.2.9): the primary's own check, written when it
-- asks the others (its answered_at starts their deadline), and each remote
-- perspective's, written by the perspective_check job that ran it. The key
-- keeps one answer per perspective: a retried job never asks twice.
CREATE TABLE perspective_answers (
    challenge_id text NOT NULL REFERENCES challenges (id),
    perspective  text NOT NULL,
    outcome      text NOT NULL,
    problem      text NOT NULL DEFAULT '',
    record       text NOT NULL DEFAULT '',
    took_us      integer NOT NULL,
    answered_at  integer NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    PRIMARY KEY (challenge_id, perspective)
) WITHOUT ROWID;
