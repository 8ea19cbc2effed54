package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterDomain is the node's cluster domain: a Service's name is
// <service>.<namespace>.svc.<ClusterDomain>.
const ClusterDomain = "cluster.local"

// dnsTTL is how long a pod's resolver may keep an answer: short, as tests
// make and delete Services.
const dnsTTL = 5

// clusterDNS stands in for cluster DNS (CoreDNS): it answers the pods of the
// node, on NodeIP:53 over UDP in the node's network namespace (the
// kubelet's clusterDNS), with the ClusterIP of each Service it is asked
// for, read from the API server. It knows nothing else: any other name is
// answered "no such name" (the node reaches no other resolver), as are
// the names of pods and headless Services.
type clusterDNS struct {
	conn   net.PacketConn
	client client.Reader
	done   chan struct{}
}

// startDNS serves the Services' names to the node's pods until stop.
func (n *Node) startDNS(c client.Reader) error {
	var conn net.PacketConn
	err := inNetNS(n.initPID, func() error {
		var err error
		conn, err = net.ListenPacket("udp4", net.JoinHostPort(NodeIP, "53"))
		return err
	})
	if err != nil {
		return fmt.Errorf("node: cluster DNS on %s:53: %w", NodeIP, err)
	}
	n.dns = &clusterDNS{conn: conn, client: c, done: make(chan struct{})}
	go n.dns.serve()
	return nil
}

// stop stops serving and waits for the server to end.
func (d *clusterDNS) stop() {
	_ = d.conn.Close()
	<-d.done
}

func (d *clusterDNS) serve() {
	defer close(d.done)
	buf := make([]byte, 1500)
	for {
		size, from, err := d.conn.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if answer, err := d.answer(buf[:size]); err == nil {
			_, _ = d.conn.WriteTo(answer, from)
		}
	}
}

// answer answers one query: the first question, as resolvers ask one.
func (d *clusterDNS) answer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	header, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	reply := dnsmessage.Header{ID: header.ID, Response: true, Authoritative: true, RecursionDesired: header.RecursionDesired}
	ip, known, err := d.lookup(q.Name.String())
	switch {
	case err != nil:
		reply.RCode = dnsmessage.RCodeServerFailure
	case !known:
		reply.RCode = dnsmessage.RCodeNameError
	case q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET && ip.IsValid():
	default:
		// The name exists, with no record of that type (AAAA: the node
		// is IPv4 only).
		ip = netip.Addr{}
	}
	b := dnsmessage.NewBuilder(nil, reply)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if known && ip.IsValid() {
		h := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
		if err := b.AResource(h, dnsmessage.AResource{A: ip.As4()}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// lookup finds the Service a name stands for: known tells whether it
// exists; ip is its IPv4 ClusterIP (invalid for a headless Service); err
// that the API server could not say.
func (d *clusterDNS) lookup(name string) (ip netip.Addr, known bool, err error) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	rest, ok := strings.CutSuffix(name, ".svc."+ClusterDomain)
	if !ok {
		return ip, false, nil
	}
	service, namespace, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(namespace, ".") {
		return ip, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	svc := &corev1.Service{}
	if err := d.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: service}, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return ip, false, nil
		}
		return ip, false, err
	}
	if ip, err = netip.ParseAddr(svc.Spec.ClusterIP); err != nil || !ip.Is4() {
		return netip.Addr{}, true, nil
	}
	return ip, true, nil
}
