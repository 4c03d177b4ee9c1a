-- 031: one statement of the per-number pause rule (sql/027), read where a
-- send is decided: the ledger's first fence (begin_delivery), every later
-- fence (advance_delivery) and a knock, which has no fence (may_send).
--
-- A document may be sent from a number unless that number's row or every
-- number's ('*') is paused, and it is not that pause's probe. every: what
-- holds it is the '*' row (the sweep then stops; a number's own pause only
-- skips that number's documents).
CREATE FUNCTION sending_gate(number text, document bigint)
RETURNS TABLE (paused boolean, every boolean)
LANGUAGE sql STABLE AS $$
    SELECT coalesce(bool_or(s.paused_at IS NOT NULL
                            AND s.probe_document_id IS DISTINCT FROM document), false),
           coalesce(bool_or(s.phone_number_id = '*' AND s.paused_at IS NOT NULL
                            AND s.probe_document_id IS DISTINCT FROM document), false)
    FROM sender_state s WHERE s.phone_number_id IN ('*', number)
$$;
