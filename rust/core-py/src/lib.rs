use pyo3::prelude::*;

#[pyfunction]
fn hello() -> u32 { pybroker_log::hello() }

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(hello, m)?)?;
    Ok(())
}
