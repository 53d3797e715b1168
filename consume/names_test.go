package consume

import (
	"errors"
	"strings"
	"testing"
)

func TestLiteTopicNameReadable(t *testing.T) {
	for _, tc := range []struct{ tenant, model, replica, want string }{
		{"acme", "llama-3-8b", "r0", "acme__llama-3-8b__r0"},
		{"acme", "llama-3-8b", "", "acme__llama-3-8b"},
		{"a_b", "c-d", "0", "a_b__c-d__0"},
	} {
		if got := LiteTopicName(tc.tenant, tc.model, tc.replica); got != tc.want {
			t.Errorf("LiteTopicName(%q, %q, %q) = %q, want %q", tc.tenant, tc.model, tc.replica, got, tc.want)
		}
	}
}

func TestLiteTopicNameHashed(t *testing.T) {
	long := strings.Repeat("t", 80)
	for _, in := range [][3]string{
		{"acme", "meta/llama-3.1-8b", "r0"}, // needs sanitising
		{long, "m", ""},                     // too long
		{"", "m", ""},                       // empty part
		{"a__b", "c", ""},                   // contains the separator
		{"a_", "b", ""},                     // trailing underscore
	} {
		name := LiteTopicName(in[0], in[1], in[2])
		if err := ValidLiteTopic(name); err != nil {
			t.Errorf("%q: %v", in, err)
		}
		if !strings.Contains(name, hashSep) {
			t.Errorf("%q: got %q, want a hashed name", in, name)
		}
	}
	if got := LiteTopicName("acme", "meta/llama-3.1-8b", "r0"); !strings.HasPrefix(got, "acme__meta-llama-3-1-8b__r0___") {
		t.Errorf("hashed name lost its readable prefix: %q", got)
	}
}

// Inputs that sanitise (or join) to the same readable text must still get
// different names.
func TestLiteTopicNameInjective(t *testing.T) {
	groups := [][][3]string{
		{{"a.b", "m", ""}, {"a-b", "m", ""}, {"a/b", "m", ""}, {"a b", "m", ""}},
		{{"a__b", "c", ""}, {"a", "b__c", ""}, {"a", "b", "c"}},
		{{"a_", "_b", ""}, {"a", "__b", ""}, {"a__", "b", ""}},
		{{"ab", "c", ""}, {"a", "bc", ""}},
		{{"x", "y", ""}, {"x", "y", "0"}},
	}
	seen := map[string][3]string{}
	for _, g := range groups {
		for _, in := range g {
			name := LiteTopicName(in[0], in[1], in[2])
			if prev, ok := seen[name]; ok && prev != in {
				t.Errorf("%q and %q share the name %q", prev, in, name)
			}
			seen[name] = in
		}
	}
}

func TestValidLiteTopic(t *testing.T) {
	for _, bad := range []string{"", "a.b", "a b", "é", strings.Repeat("a", 65), "a$b"} {
		if err := ValidLiteTopic(bad); !errors.Is(err, ErrInvalidLiteTopic) {
			t.Errorf("ValidLiteTopic(%q) = %v, want ErrInvalidLiteTopic", bad, err)
		}
	}
	for _, good := range []string{"a", "A-z_0", strings.Repeat("a", 64)} {
		if err := ValidLiteTopic(good); err != nil {
			t.Errorf("ValidLiteTopic(%q) = %v", good, err)
		}
	}
}

func FuzzLiteTopicName(f *testing.F) {
	f.Add("acme", "llama-3-8b", "r0")
	f.Add("a.b", "m", "")
	f.Add("", "", "")
	f.Add(strings.Repeat("é", 40), "m\x00", "_")
	f.Fuzz(func(t *testing.T, tenant, model, replica string) {
		name := LiteTopicName(tenant, model, replica)
		if err := ValidLiteTopic(name); err != nil {
			t.Fatalf("LiteTopicName(%q, %q, %q) = %q: %v", tenant, model, replica, name, err)
		}
		if again := LiteTopicName(tenant, model, replica); again != name {
			t.Fatalf("not deterministic: %q then %q", name, again)
		}
		// A readable name must decode back to exactly its inputs.
		if !strings.Contains(name, hashSep) {
			want := tenant + "__" + model
			if replica != "" {
				want += "__" + replica
			}
			if name != want {
				t.Fatalf("readable %q does not spell its inputs %q", name, want)
			}
		}
	})
}
