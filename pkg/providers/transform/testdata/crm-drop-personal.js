// A Stripe customer event for a CRM that must not receive personal data:
// the customer's email, name, phone, address and shipping are dropped,
// and so is every metadata key that starts with "pii_".
const personal = ["email", "name", "phone", "address", "shipping", "tax_ids"];

function transform(request) {
  const event = request.body;
  const customer = event.data.object;
  for (const field of personal) delete customer[field];
  for (const key of Object.keys(customer.metadata || {})) {
    if (key.startsWith("pii_")) delete customer.metadata[key];
  }
  return {body: event};
}
