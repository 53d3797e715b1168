// Package consume is the queue between pacegate's HTTP side and the GPUs.
//
// TODO(consume): the full package doc (ack at dispatch, why) lands with the
// consumer.
package consume
