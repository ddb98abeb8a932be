-- 0004: the cost of each model request, in millionths of a US dollar; NULL when the model
-- had no known price.
ALTER TABLE model_usage ADD COLUMN cost_micros INTEGER;

CREATE INDEX model_usage_created ON model_usage (created_at);
