package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/testkit/loadtest"
	"github.com/hookline/hookline/pkg/topics"
)

// minimal is the least a durable webhook handler does: gin reads the
// body, franz-go produces it to topic as ingest's client does (acks=all,
// idempotent, no linger, the same partitioner), and it answers 202 once
// Kafka acknowledged, 503 otherwise. No signature, key, event type,
// headers, limits, metrics or log: what ingest costs beyond this is
// hookline's own work per request.
func minimal(addr, topic string) error {
	kc, err := loadtest.KafkaConfig()
	if err != nil {
		return err
	}
	cl, err := kc.NewClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RecordPartitioner(topics.Partitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var n atomic.Uint64
	r := gin.New()
	r.POST("/webhooks/:provider", func(c *gin.Context) {
		b, err := io.ReadAll(c.Request.Body)
		if err != nil {
			c.AbortWithStatus(http.StatusBadRequest)
			return
		}
		key := c.Param("provider") + ":" + strconv.FormatUint(n.Add(1), 10)
		if err := cl.ProduceSync(c.Request.Context(), &kgo.Record{Topic: topic, Key: []byte(key), Value: b}).FirstErr(); err != nil {
			c.AbortWithStatus(http.StatusServiceUnavailable)
			return
		}
		c.JSON(http.StatusAccepted, gin.H{"status": "accepted", "idempotency_key": key, "request_id": fmt.Sprint(len(b))})
	})
	r.GET("/readyz", func(c *gin.Context) { c.Status(http.StatusOK) })
	return http.ListenAndServe(addr, r)
}
