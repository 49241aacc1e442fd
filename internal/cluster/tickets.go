package cluster

// Registration tickets across gateways: an agent registers over HTTP on one
// gateway and opens its WebSocket with the ticket it got, which a load
// balancer may send to another. That gateway asks the others on the bus;
// the one that issued the ticket answers with the registration, the rest
// stay silent.

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// ticketMsg asks the gateway that issued a registration ticket for it.
type ticketMsg struct {
	Ticket string `json:"ticket"`
	Key    string `json:"key"`
}

// Redeem asks the other gateways for a registration ticket one of them
// issued: the registration and the WebSocket may reach different gateways.
func (c *Cluster) Redeem(ctx context.Context, ticket, keyID string) (*agentproto.Registration, bool) {
	b, _ := json.Marshal(ticketMsg{Ticket: ticket, Key: keyID})
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// Not nc.Request: the registration may come back in parts.
	answer := make(chan []byte, 1)
	inbox := nats.NewInbox()
	sub, err := c.nc.Subscribe(inbox, c.assemble(func(m *nats.Msg) {
		select {
		case answer <- m.Data:
		default:
		}
	}))
	if err != nil {
		return nil, false
	}
	defer sub.Unsubscribe()
	if err := c.nc.PublishMsg(&nats.Msg{Subject: subjTickets, Reply: inbox, Data: b}); err != nil {
		return nil, false
	}
	var data []byte
	select {
	case data = <-answer:
	case <-ctx.Done():
		return nil, false
	}
	reg := new(agentproto.Registration)
	if json.Unmarshal(data, reg) != nil {
		return nil, false
	}
	return reg, true
}

// onTicket answers a request for a registration ticket this gateway
// issued.
func (c *Cluster) onTicket(m *nats.Msg) {
	var msg ticketMsg
	if c.opts.Redeem == nil || m.Reply == "" || json.Unmarshal(m.Data, &msg) != nil {
		return
	}
	reg, ok := c.opts.Redeem(msg.Ticket, msg.Key)
	if !ok {
		return // not ours: stay silent, the one that has it answers
	}
	b, err := json.Marshal(reg)
	if err == nil && m.Reply != "" {
		c.send(m.Reply, "", b)
	}
}
