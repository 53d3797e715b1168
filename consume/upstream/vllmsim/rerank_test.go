package vllmsim

import "testing"

func TestRerankScoreGolden(t *testing.T) {
	docs := `"documents":["the cat sat","a dog","cat and dog"]`
	runGolden(t, []routeCase{
		{name: "rerank", path: "/rerank", body: `{"model":"sim-model","query":"cat dog",` + docs + `}`, hdr: reqID},
		{name: "rerank_v1_top_n", path: "/v1/rerank", body: `{"query":"cat dog",` + docs + `,"top_n":2}`, hdr: reqID},
		{name: "rerank_v2", path: "/v2/rerank", body: `{"query":"dog",` + docs + `}`, hdr: reqID},
		{name: "rerank_err_no_query", path: "/rerank", body: `{` + docs + `}`},
		{name: "score_one_to_many", path: "/score", body: `{"model":"sim-model","text_1":"cat dog","text_2":["the cat","dog dog"]}`, hdr: reqID},
		{name: "score_v1_pairs", path: "/v1/score", body: `{"text_1":["a","b"],"text_2":["a","c"]}`, hdr: reqID},
		{name: "score_err_lengths", path: "/score", body: `{"text_1":["a","b"],"text_2":["a","b","c"]}`},
		{name: "fault_rerank_status_503", path: "/rerank", body: `{"query":"x",` + docs + `}`, hdr: withFault("status=503")},
	})
}
