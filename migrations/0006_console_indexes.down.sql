DROP INDEX reservations_key_created;
