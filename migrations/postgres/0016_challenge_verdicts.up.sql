-- The overview's chart of validations counts the challenges validated in
-- each of the last hours: this index reads only that window.
CREATE INDEX challenges_validated_idx ON challenges (validated_at) WHERE validated_at IS NOT NULL;
