package node

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestClusterDNSAnswers: a Service's name (in any case: resolvers may mix
// it, and get it back as they sent it) is answered with its ClusterIP; the
// name of a headless
// Service, and an AAAA question, exist with no record; any other name
// (another Service, a name outside the cluster domain, a pod's, the search
// list's misses) is "no such name". Each answer carries the query's ID
// and question.
func TestClusterDNSAnswers(t *testing.T) {
	dns := &clusterDNS{client: fake.NewClientBuilder().WithObjects(
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "np", Name: "guarded"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.42"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "np", Name: "headless"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
	).Build()}
	for _, tc := range []struct {
		name  string
		qtype dnsmessage.Type
		rcode dnsmessage.RCode
		want  string // the A record, "" for none
	}{
		{name: "guarded.np.svc.cluster.local.", qtype: dnsmessage.TypeA, want: "10.0.0.42"},
		{name: "Guarded.NP.svc.Cluster.Local.", qtype: dnsmessage.TypeA, want: "10.0.0.42"},
		{name: "guarded.np.svc.cluster.local.", qtype: dnsmessage.TypeAAAA},
		{name: "headless.np.svc.cluster.local.", qtype: dnsmessage.TypeA},
		{name: "other.np.svc.cluster.local.", qtype: dnsmessage.TypeA, rcode: dnsmessage.RCodeNameError},
		{name: "guarded.np.svc.np.svc.cluster.local.", qtype: dnsmessage.TypeA, rcode: dnsmessage.RCodeNameError},
		{name: "10-244-0-5.np.pod.cluster.local.", qtype: dnsmessage.TypeA, rcode: dnsmessage.RCodeNameError},
		{name: "example.com.", qtype: dnsmessage.TypeA, rcode: dnsmessage.RCodeNameError},
	} {
		t.Run(tc.name+"/"+tc.qtype.String(), func(t *testing.T) {
			name, err := dnsmessage.NewName(tc.name)
			require.NoError(t, err)
			q := dnsmessage.Question{Name: name, Type: tc.qtype, Class: dnsmessage.ClassINET}
			query, err := (&dnsmessage.Message{Header: dnsmessage.Header{ID: 4242, RecursionDesired: true}, Questions: []dnsmessage.Question{q}}).Pack()
			require.NoError(t, err)
			data, err := dns.answer(query)
			require.NoError(t, err)
			var reply dnsmessage.Message
			require.NoError(t, reply.Unpack(data))
			require.Equal(t, uint16(4242), reply.ID)
			require.True(t, reply.Response)
			require.Equal(t, tc.rcode, reply.RCode)
			require.Equal(t, []dnsmessage.Question{q}, reply.Questions)
			if tc.want == "" {
				require.Empty(t, reply.Answers)
				return
			}
			require.Len(t, reply.Answers, 1)
			a, ok := reply.Answers[0].Body.(*dnsmessage.AResource)
			require.True(t, ok, "an A record: %v", reply.Answers[0].Body)
			require.Equal(t, netip.MustParseAddr(tc.want), netip.AddrFrom4(a.A))
		})
	}
}
