package main

import (
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "modernc.org/sqlite"
)

// Order is one order of the example's service.
type Order struct {
	ID        string    `json:"id"`
	Customer  string    `json:"customer"`
	Status    string    `json:"status"`
	Total     int       `json:"total" desc:"Total in cents"`
	CreatedAt time.Time `json:"createdAt"`
}

// OrderService stands for the service code you already have. It keeps orders
// in SQLite, so a create_order retried on another replica finds the order
// made by the first attempt.
type OrderService struct {
	db *sql.DB
}

// OpenOrderService opens (and on first use fills) the order database.
func OpenOrderService(path string) (*OrderService, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, err
	}
	s := &OrderService{db: db}
	if err := s.init(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open orders %s: %w", path, err)
	}
	return s, nil
}

func (s *OrderService) init() error {
	_, err := s.db.Exec(`
CREATE TABLE IF NOT EXISTS orders (
	id TEXT PRIMARY KEY,
	customer TEXT NOT NULL,
	status TEXT NOT NULL,
	total INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	request_id TEXT UNIQUE
);
INSERT OR IGNORE INTO orders (id, customer, status, total, created_at) VALUES
	('1040', 'ada',   'shipped',   1250, 1764000000000),
	('1041', 'grace', 'open',      8900, 1764100000000),
	('1042', 'ada',   'open',      4200, 1764200000000),
	('1043', 'ada',   'cancelled', 1999, 1764300000000),
	('1044', 'linus', 'open',       500, 1764400000000);`)
	return err
}

// Close closes the database.
func (s *OrderService) Close() error { return s.db.Close() }

const orderCols = `id, customer, status, total, created_at`

func scanOrders(rows *sql.Rows, err error) []Order {
	if err != nil {
		return nil
	}
	defer rows.Close()
	out := []Order{}
	for rows.Next() {
		var o Order
		var ms int64
		if rows.Scan(&o.ID, &o.Customer, &o.Status, &o.Total, &ms) == nil {
			o.CreatedAt = time.UnixMilli(ms).UTC()
			out = append(out, o)
		}
	}
	return out
}

// FindByID returns the order with that id.
func (s *OrderService) FindByID(id string) (Order, bool) {
	found := scanOrders(s.db.Query(`SELECT `+orderCols+` FROM orders WHERE id = ?`, id))
	if len(found) == 0 {
		return Order{}, false
	}
	return found[0], true
}

// Search lists a customer's orders, newest first.
func (s *OrderService) Search(customer, status string, limit int) []Order {
	return scanOrders(s.db.Query(`SELECT `+orderCols+` FROM orders
		WHERE customer = ? AND (? = '' OR status = ?) ORDER BY created_at DESC LIMIT ?`, customer, status, status, limit))
}

// All lists every order in status ("" for any), newest first.
func (s *OrderService) All(status string) []Order {
	return scanOrders(s.db.Query(`SELECT `+orderCols+` FROM orders
		WHERE ? = '' OR status = ? ORDER BY created_at DESC`, status, status))
}

// Open lists every order that has not shipped yet.
func (s *OrderService) Open() []Order {
	return scanOrders(s.db.Query(`SELECT ` + orderCols + ` FROM orders WHERE status = 'open' ORDER BY created_at DESC`))
}

// Create creates an order. The request id goes into the order's row, in
// the same statement, so that a retry after an unknown outcome can find what
// the earlier attempt did (FindByRequest); its UNIQUE constraint turns two
// attempts that run at once into one order.
func (s *OrderService) Create(requestID, customer string, total int) (Order, error) {
	if requestID == "" {
		return Order{}, errors.New("requestId is empty: pass a unique id, for example a UUID, and reuse it when retrying")
	}
	// WHERE true: SQLite's way to tell an upsert from a join's ON.
	_, err := s.db.Exec(`INSERT INTO orders (id, customer, status, total, created_at, request_id)
		SELECT COALESCE(MAX(CAST(id AS INTEGER)), 1000) + 1, ?, 'open', ?, ?, ? FROM orders WHERE true
		ON CONFLICT (request_id) DO NOTHING`, customer, total, time.Now().UnixMilli(), requestID)
	if err != nil {
		return Order{}, err
	}
	o, _ := s.FindByRequest(requestID)
	return o, nil
}

// FindByRequest returns the order created under requestID.
func (s *OrderService) FindByRequest(requestID string) (Order, bool) {
	found := scanOrders(s.db.Query(`SELECT `+orderCols+` FROM orders WHERE request_id = ?`, requestID))
	if len(found) == 0 {
		return Order{}, false
	}
	return found[0], true
}
