package revocation

// SetSelectPage makes Select read pages of n certificates, so a test
// crosses pages with a few.
func SetSelectPage(s *Service, n int) { s.page = n }
