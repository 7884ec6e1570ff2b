package admin

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes: openapi.json documents exactly the API's routes,
// each with the role the server checks.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	b, err := openAPIFS.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			Role string `json:"x-hallmark-role"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	var documented, served []string
	for p, ops := range spec.Paths {
		for m, op := range ops {
			documented = append(documented, strings.ToUpper(m)+" "+p+" "+op.Role)
		}
	}
	for _, rt := range apiRoutes {
		served = append(served, rt.method+" "+rt.path+" "+rt.role)
	}
	sort.Strings(documented)
	sort.Strings(served)
	if strings.Join(documented, "\n") != strings.Join(served, "\n") {
		t.Fatalf("openapi.json documents\n%s\nbut the server routes\n%s", strings.Join(documented, "\n"), strings.Join(served, "\n"))
	}
	if !strings.HasPrefix(spec.OpenAPI, "3.1") {
		t.Fatalf("openapi %q: mutualTLS needs OpenAPI 3.1", spec.OpenAPI)
	}
}
