package rocketmq

// DropOnBroker unsubscribes lt on the current consumer behind the
// backend's back: the broker and the client forget the name while the
// backend still counts it as subscribed. That is the state the client's
// sync race or a LiteTopic expiry leaves behind, made on demand.
func DropOnBroker(b *Backend, lt string) error {
	return b.cl.Load().consumer.UnSubscribeLite(lt)
}
