// Last year's consumer reads invoice events with the field names of its
// v1 contract: invoice_id, customer_id, amount_cents, paid_at (ISO 8601)
// and a flat status. The time comes from the event, never from a clock.
addHandler("transform", (request, context) => {
  const invoice = request.body.data.object;
  return {
    body: {
      invoice_id: invoice.id,
      customer_id: invoice.customer,
      amount_cents: invoice.amount_paid,
      currency: invoice.currency.toUpperCase(),
      paid_at: new Date(invoice.status_transitions.paid_at * 1000).toISOString(),
      status: invoice.status,
      event: context.event_type,
    },
    headers: {...request.headers, "x-contract-version": "1"},
  };
});
