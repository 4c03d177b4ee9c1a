-- 005: the generation queue index leaves abandoned documents out, instead of
-- parking them at a far-future next_generation_at (a brief abandoned as stale
-- before it was generated drops out of the index, and of the guard's range).
DROP INDEX documents_generation_queue;
CREATE INDEX documents_generation_queue ON documents (next_generation_at)
    WHERE status IN ('pending', 'generating') AND abandoned_at IS NULL;
