DROP FUNCTION reserve_batch;
