ALTER TABLE reservations DROP COLUMN error_code, DROP COLUMN error_class;
